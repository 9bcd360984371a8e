from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="LaneView")



@_attrs_define
class LaneView:
    """ A delivery's place in its channel's lane for its conversation.

        Attributes:
            position (str): `head` (it is the one attempted), `waiting` (behind `head_delivery_id`), or `out`
                (dead-lettered and no longer holding the lane).
            held (bool): The head was dead-lettered and the lane waits for its replay or a release
                (`POST /api/v1/channels/{id}/lanes/release`).
            head_delivery_id (None | str | Unset): The delivery that holds the lane, if any.
     """

    position: str
    held: bool
    head_delivery_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        position = self.position

        held = self.held

        head_delivery_id: None | str | Unset
        if isinstance(self.head_delivery_id, Unset):
            head_delivery_id = UNSET
        else:
            head_delivery_id = self.head_delivery_id


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "position": position,
            "held": held,
        })
        if head_delivery_id is not UNSET:
            field_dict["head_delivery_id"] = head_delivery_id

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        position = d.pop("position")

        held = d.pop("held")

        def _parse_head_delivery_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        head_delivery_id = _parse_head_delivery_id(d.pop("head_delivery_id", UNSET))


        lane_view = cls(
            position=position,
            held=held,
            head_delivery_id=head_delivery_id,
        )


        lane_view.additional_properties = d
        return lane_view

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
