from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="UsageDayView")



@_attrs_define
class UsageDayView:
    """ One day of a tenant's usage, or the total of several.

        Attributes:
            deliveries (int): Deliveries created (one per activity and channel).
            attempts (int): Requests made to receivers: first tries and retries.
            dead_letters (int):
            filtered (int): Of the deliveries, those their channel's filter did not want (never attempted).
            estimated_cost_usd (float): The estimated AWS cost, in US dollars.
            date (None | str | Unset): `YYYY-MM-DD` (UTC); absent on the total.
     """

    deliveries: int
    attempts: int
    dead_letters: int
    filtered: int
    estimated_cost_usd: float
    date: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        deliveries = self.deliveries

        attempts = self.attempts

        dead_letters = self.dead_letters

        filtered = self.filtered

        estimated_cost_usd = self.estimated_cost_usd

        date: None | str | Unset
        if isinstance(self.date, Unset):
            date = UNSET
        else:
            date = self.date


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "deliveries": deliveries,
            "attempts": attempts,
            "dead_letters": dead_letters,
            "filtered": filtered,
            "estimated_cost_usd": estimated_cost_usd,
        })
        if date is not UNSET:
            field_dict["date"] = date

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        deliveries = d.pop("deliveries")

        attempts = d.pop("attempts")

        dead_letters = d.pop("dead_letters")

        filtered = d.pop("filtered")

        estimated_cost_usd = d.pop("estimated_cost_usd")

        def _parse_date(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        date = _parse_date(d.pop("date", UNSET))


        usage_day_view = cls(
            deliveries=deliveries,
            attempts=attempts,
            dead_letters=dead_letters,
            filtered=filtered,
            estimated_cost_usd=estimated_cost_usd,
            date=date,
        )


        usage_day_view.additional_properties = d
        return usage_day_view

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
