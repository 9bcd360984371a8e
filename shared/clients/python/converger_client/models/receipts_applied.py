from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast






T = TypeVar("T", bound="ReceiptsApplied")



@_attrs_define
class ReceiptsApplied:
    """ What a receipt notification did.

        Attributes:
            received (int):
            applied (int):
            ignored (int):
            unknown (list[str]): Provider message ids no delivery of the channel has.
     """

    received: int
    applied: int
    ignored: int
    unknown: list[str]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        received = self.received

        applied = self.applied

        ignored = self.ignored

        unknown = self.unknown




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "received": received,
            "applied": applied,
            "ignored": ignored,
            "unknown": unknown,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        received = d.pop("received")

        applied = d.pop("applied")

        ignored = d.pop("ignored")

        unknown = cast(list[str], d.pop("unknown"))


        receipts_applied = cls(
            received=received,
            applied=applied,
            ignored=ignored,
            unknown=unknown,
        )


        receipts_applied.additional_properties = d
        return receipts_applied

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
