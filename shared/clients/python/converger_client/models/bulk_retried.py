from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.bulk_cost import BulkCost





T = TypeVar("T", bound="BulkRetried")



@_attrs_define
class BulkRetried:
    """ What a bulk replay did.

        Attributes:
            retried (int):
            has_more (bool): More dead letters match: call again.
            cost (BulkCost): The requests a bulk replay made.
     """

    retried: int
    has_more: bool
    cost: BulkCost
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.bulk_cost import BulkCost # noqa: PLC0415
        retried = self.retried

        has_more = self.has_more

        cost = self.cost.to_dict()


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "retried": retried,
            "has_more": has_more,
            "cost": cost,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.bulk_cost import BulkCost # noqa: PLC0415
        d = dict(src_dict)
        retried = d.pop("retried")

        has_more = d.pop("has_more")

        cost = BulkCost.from_dict(d.pop("cost"))




        bulk_retried = cls(
            retried=retried,
            has_more=has_more,
            cost=cost,
        )


        bulk_retried.additional_properties = d
        return bulk_retried

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
