from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.health_check import HealthCheck





T = TypeVar("T", bound="ChannelHealth")



@_attrs_define
class ChannelHealth:
    """ A channel's health checks, newest first.

        Attributes:
            channel_id (str):
            status (str): `healthy`, `degraded`, `unhealthy` or `unknown`.
            history (list[HealthCheck]):
            checked_at (None | str | Unset):
     """

    channel_id: str
    status: str
    history: list[HealthCheck]
    checked_at: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.health_check import HealthCheck # noqa: PLC0415
        channel_id = self.channel_id

        status = self.status

        history = []
        for history_item_data in self.history:
            history_item = history_item_data.to_dict()
            history.append(history_item)



        checked_at: None | str | Unset
        if isinstance(self.checked_at, Unset):
            checked_at = UNSET
        else:
            checked_at = self.checked_at


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "channel_id": channel_id,
            "status": status,
            "history": history,
        })
        if checked_at is not UNSET:
            field_dict["checked_at"] = checked_at

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.health_check import HealthCheck # noqa: PLC0415
        d = dict(src_dict)
        channel_id = d.pop("channel_id")

        status = d.pop("status")

        history = []
        _history = d.pop("history")
        for history_item_data in (_history):
            history_item = HealthCheck.from_dict(history_item_data)



            history.append(history_item)


        def _parse_checked_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        checked_at = _parse_checked_at(d.pop("checked_at", UNSET))


        channel_health = cls(
            channel_id=channel_id,
            status=status,
            history=history,
            checked_at=checked_at,
        )


        channel_health.additional_properties = d
        return channel_health

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
