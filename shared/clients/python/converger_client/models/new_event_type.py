from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.new_event_type_schema_type_0 import NewEventTypeSchemaType0





T = TypeVar("T", bound="NewEventType")



@_attrs_define
class NewEventType:
    """ 
        Attributes:
            name (str): 1 to 100 letters, digits, `.`, `_`, `-`, `:` (`order.paid`).
            description (None | str | Unset): What the type means, for producers and receivers (at most 1,000 characters).
            schema (NewEventTypeSchemaType0 | None | Unset): A JSON Schema (draft 2020-12, at most 32 KiB, references within
                itself only) that
                every payload of this type must fit.
            deprecated (bool | Unset):
     """

    name: str
    description: None | str | Unset = UNSET
    schema: NewEventTypeSchemaType0 | None | Unset = UNSET
    deprecated: bool | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        from ..models.new_event_type_schema_type_0 import NewEventTypeSchemaType0 # noqa: PLC0415
        name = self.name

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        schema: dict[str, Any] | None | Unset
        if isinstance(self.schema, Unset):
            schema = UNSET
        elif isinstance(self.schema, NewEventTypeSchemaType0):
            schema = self.schema.to_dict()
        else:
            schema = self.schema

        deprecated = self.deprecated


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "name": name,
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
        from ..models.new_event_type_schema_type_0 import NewEventTypeSchemaType0 # noqa: PLC0415
        d = dict(src_dict)
        name = d.pop("name")

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))


        def _parse_schema(data: object) -> NewEventTypeSchemaType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                schema_type_0 = NewEventTypeSchemaType0.from_dict(data)



                return schema_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NewEventTypeSchemaType0 | None | Unset, data)

        schema = _parse_schema(d.pop("schema", UNSET))


        deprecated = d.pop("deprecated", UNSET)

        new_event_type = cls(
            name=name,
            description=description,
            schema=schema,
            deprecated=deprecated,
        )

        return new_event_type

