from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.usage_day_view import UsageDayView
  from ..models.usage_view_estimated_cost_by_service_usd import UsageViewEstimatedCostByServiceUsd
  from ..models.usage_view_prices_per_million_usd import UsageViewPricesPerMillionUsd





T = TypeVar("T", bound="UsageView")



@_attrs_define
class UsageView:
    """ A tenant's usage per day over `from..=to`, its total, and the estimate of what it cost.

        Attributes:
            from_ (str):
            to (str):
            days (list[UsageDayView]):
            total (UsageDayView): One day of a tenant's usage, or the total of several.
            estimated_cost_by_service_usd (UsageViewEstimatedCostByServiceUsd): The total's estimate by service (`dynamodb`,
                `sqs`, `eventbridge`, `api_gateway`,
                `lambda`, `logs`), in US dollars.
            prices_per_million_usd (UsageViewPricesPerMillionUsd): The prices the estimate used, in US dollars per million
                units.
            note (str): What the estimate is and is not.
     """

    from_: str
    to: str
    days: list[UsageDayView]
    total: UsageDayView
    estimated_cost_by_service_usd: UsageViewEstimatedCostByServiceUsd
    prices_per_million_usd: UsageViewPricesPerMillionUsd
    note: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.usage_day_view import UsageDayView # noqa: PLC0415
        from ..models.usage_view_estimated_cost_by_service_usd import UsageViewEstimatedCostByServiceUsd # noqa: PLC0415
        from ..models.usage_view_prices_per_million_usd import UsageViewPricesPerMillionUsd # noqa: PLC0415
        from_ = self.from_

        to = self.to

        days = []
        for days_item_data in self.days:
            days_item = days_item_data.to_dict()
            days.append(days_item)



        total = self.total.to_dict()

        estimated_cost_by_service_usd = self.estimated_cost_by_service_usd.to_dict()

        prices_per_million_usd = self.prices_per_million_usd.to_dict()

        note = self.note


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "from": from_,
            "to": to,
            "days": days,
            "total": total,
            "estimated_cost_by_service_usd": estimated_cost_by_service_usd,
            "prices_per_million_usd": prices_per_million_usd,
            "note": note,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.usage_day_view import UsageDayView # noqa: PLC0415
        from ..models.usage_view_estimated_cost_by_service_usd import UsageViewEstimatedCostByServiceUsd # noqa: PLC0415
        from ..models.usage_view_prices_per_million_usd import UsageViewPricesPerMillionUsd # noqa: PLC0415
        d = dict(src_dict)
        from_ = d.pop("from")

        to = d.pop("to")

        days = []
        _days = d.pop("days")
        for days_item_data in (_days):
            days_item = UsageDayView.from_dict(days_item_data)



            days.append(days_item)


        total = UsageDayView.from_dict(d.pop("total"))




        estimated_cost_by_service_usd = UsageViewEstimatedCostByServiceUsd.from_dict(d.pop("estimated_cost_by_service_usd"))




        prices_per_million_usd = UsageViewPricesPerMillionUsd.from_dict(d.pop("prices_per_million_usd"))




        note = d.pop("note")

        usage_view = cls(
            from_=from_,
            to=to,
            days=days,
            total=total,
            estimated_cost_by_service_usd=estimated_cost_by_service_usd,
            prices_per_million_usd=prices_per_million_usd,
            note=note,
        )


        usage_view.additional_properties = d
        return usage_view

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
