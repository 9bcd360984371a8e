from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="ReplayJobView")



@_attrs_define
class ReplayJobView:
    """ A replay job's progress.

        Attributes:
            id (str):
            channel_id (str):
            status (str): `running`, `done` or `failed`.
            retried (int):
            has_more (bool):
            limit (int):
            created_at (str):
            updated_at (str):
            activity_id (None | str | Unset):
            error (None | str | Unset):
     """

    id: str
    channel_id: str
    status: str
    retried: int
    has_more: bool
    limit: int
    created_at: str
    updated_at: str
    activity_id: None | str | Unset = UNSET
    error: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        id = self.id

        channel_id = self.channel_id

        status = self.status

        retried = self.retried

        has_more = self.has_more

        limit = self.limit

        created_at = self.created_at

        updated_at = self.updated_at

        activity_id: None | str | Unset
        if isinstance(self.activity_id, Unset):
            activity_id = UNSET
        else:
            activity_id = self.activity_id

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "id": id,
            "channel_id": channel_id,
            "status": status,
            "retried": retried,
            "has_more": has_more,
            "limit": limit,
            "created_at": created_at,
            "updated_at": updated_at,
        })
        if activity_id is not UNSET:
            field_dict["activity_id"] = activity_id
        if error is not UNSET:
            field_dict["error"] = error

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        channel_id = d.pop("channel_id")

        status = d.pop("status")

        retried = d.pop("retried")

        has_more = d.pop("has_more")

        limit = d.pop("limit")

        created_at = d.pop("created_at")

        updated_at = d.pop("updated_at")

        def _parse_activity_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        activity_id = _parse_activity_id(d.pop("activity_id", UNSET))


        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))


        replay_job_view = cls(
            id=id,
            channel_id=channel_id,
            status=status,
            retried=retried,
            has_more=has_more,
            limit=limit,
            created_at=created_at,
            updated_at=updated_at,
            activity_id=activity_id,
            error=error,
        )


        replay_job_view.additional_properties = d
        return replay_job_view

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
