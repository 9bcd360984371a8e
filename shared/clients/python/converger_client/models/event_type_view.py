from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.event_type_view_schema_type_0 import EventTypeViewSchemaType0





T = TypeVar("T", bound="EventTypeView")



@_attrs_define
class EventTypeView:
    """ An event type of the tenant's catalog.

        Attributes:
            name (str):
            deprecated (bool):
            created_at (str):
            updated_at (str):
            description (None | str | Unset):
            schema (EventTypeViewSchemaType0 | None | Unset): The JSON Schema (draft 2020-12) its payloads must fit, when it
                has one.
     """

    name: str
    deprecated: bool
    created_at: str
    updated_at: str
    description: None | str | Unset = UNSET
    schema: EventTypeViewSchemaType0 | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.event_type_view_schema_type_0 import EventTypeViewSchemaType0 # noqa: PLC0415
        name = self.name

        deprecated = self.deprecated

        created_at = self.created_at

        updated_at = self.updated_at

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        schema: dict[str, Any] | None | Unset
        if isinstance(self.schema, Unset):
            schema = UNSET
        elif isinstance(self.schema, EventTypeViewSchemaType0):
            schema = self.schema.to_dict()
        else:
            schema = self.schema


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "name": name,
            "deprecated": deprecated,
            "created_at": created_at,
            "updated_at": updated_at,
        })
        if description is not UNSET:
            field_dict["description"] = description
        if schema is not UNSET:
            field_dict["schema"] = schema

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.event_type_view_schema_type_0 import EventTypeViewSchemaType0 # noqa: PLC0415
        d = dict(src_dict)
        name = d.pop("name")

        deprecated = d.pop("deprecated")

        created_at = d.pop("created_at")

        updated_at = d.pop("updated_at")

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))


        def _parse_schema(data: object) -> EventTypeViewSchemaType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                schema_type_0 = EventTypeViewSchemaType0.from_dict(data)



                return schema_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(EventTypeViewSchemaType0 | None | Unset, data)

        schema = _parse_schema(d.pop("schema", UNSET))


        event_type_view = cls(
            name=name,
            deprecated=deprecated,
            created_at=created_at,
            updated_at=updated_at,
            description=description,
            schema=schema,
        )


        event_type_view.additional_properties = d
        return event_type_view

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
