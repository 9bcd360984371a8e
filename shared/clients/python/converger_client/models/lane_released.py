from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="LaneReleased")



@_attrs_define
class LaneReleased:
    """ What a release did.

        Attributes:
            released (bool):
            dead_delivery_id (str): The dead letter the lane no longer waits for (it stays failed; a replay sends it
                again after the deliveries that were waiting).
     """

    released: bool
    dead_delivery_id: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        released = self.released

        dead_delivery_id = self.dead_delivery_id


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "released": released,
            "dead_delivery_id": dead_delivery_id,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        released = d.pop("released")

        dead_delivery_id = d.pop("dead_delivery_id")

        lane_released = cls(
            released=released,
            dead_delivery_id=dead_delivery_id,
        )


        lane_released.additional_properties = d
        return lane_released

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
