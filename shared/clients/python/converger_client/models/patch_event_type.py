from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.patch_event_type_schema_type_0 import PatchEventTypeSchemaType0





T = TypeVar("T", bound="PatchEventType")



@_attrs_define
class PatchEventType:
    """ 
        Attributes:
            description (None | str | Unset): `null` removes it.
            schema (None | PatchEventTypeSchemaType0 | Unset): Replaces the schema; `null` removes it (payloads are no
                longer checked).
            deprecated (bool | None | Unset):
     """

    description: None | str | Unset = UNSET
    schema: None | PatchEventTypeSchemaType0 | Unset = UNSET
    deprecated: bool | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        from ..models.patch_event_type_schema_type_0 import PatchEventTypeSchemaType0 # noqa: PLC0415
        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        schema: dict[str, Any] | None | Unset
        if isinstance(self.schema, Unset):
            schema = UNSET
        elif isinstance(self.schema, PatchEventTypeSchemaType0):
            schema = self.schema.to_dict()
        else:
            schema = self.schema

        deprecated: bool | None | Unset
        if isinstance(self.deprecated, Unset):
            deprecated = UNSET
        else:
            deprecated = self.deprecated


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if description is not UNSET:
            field_dict["description"] = description
        if schema is not UNSET:
            field_dict["schema"] = schema
        if deprecated is not UNSET:
            field_dict["deprecated"] = deprecated

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.patch_event_type_schema_type_0 import PatchEventTypeSchemaType0 # noqa: PLC0415
        d = dict(src_dict)
        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))


        def _parse_schema(data: object) -> None | PatchEventTypeSchemaType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                schema_type_0 = PatchEventTypeSchemaType0.from_dict(data)



                return schema_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PatchEventTypeSchemaType0 | Unset, data)

        schema = _parse_schema(d.pop("schema", UNSET))


        def _parse_deprecated(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        deprecated = _parse_deprecated(d.pop("deprecated", UNSET))


        patch_event_type = cls(
            description=description,
            schema=schema,
            deprecated=deprecated,
        )

        return patch_event_type

