from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="HealthCheck")



@_attrs_define
class HealthCheck:
    """ 
        Attributes:
            status (str):
            failure_rate (float):
            total_deliveries (int):
            failed_deliveries (int):
            checked_at (str):
     """

    status: str
    failure_rate: float
    total_deliveries: int
    failed_deliveries: int
    checked_at: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        status = self.status

        failure_rate = self.failure_rate

        total_deliveries = self.total_deliveries

        failed_deliveries = self.failed_deliveries

        checked_at = self.checked_at


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "status": status,
            "failure_rate": failure_rate,
            "total_deliveries": total_deliveries,
            "failed_deliveries": failed_deliveries,
            "checked_at": checked_at,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        status = d.pop("status")

        failure_rate = d.pop("failure_rate")

        total_deliveries = d.pop("total_deliveries")

        failed_deliveries = d.pop("failed_deliveries")

        checked_at = d.pop("checked_at")

        health_check = cls(
            status=status,
            failure_rate=failure_rate,
            total_deliveries=total_deliveries,
            failed_deliveries=failed_deliveries,
            checked_at=checked_at,
        )


        health_check.additional_properties = d
        return health_check

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
