from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.upload_view_headers import UploadViewHeaders





T = TypeVar("T", bound="UploadView")



@_attrs_define
class UploadView:
    """ Where to send a large payload (`POST /api/v1/payloads`): `method` to `url` with
    `headers`, before `expires_at`; then name `upload_id` as an activity's `payload_upload`.

        Attributes:
            upload_id (str):
            url (str):
            method (str):
            headers (UploadViewHeaders):
            expires_at (str): RFC 3339; fifteen minutes after it was given.
            max_bytes (int): The largest payload it takes.
     """

    upload_id: str
    url: str
    method: str
    headers: UploadViewHeaders
    expires_at: str
    max_bytes: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.upload_view_headers import UploadViewHeaders # noqa: PLC0415
        upload_id = self.upload_id

        url = self.url

        method = self.method

        headers = self.headers.to_dict()

        expires_at = self.expires_at

        max_bytes = self.max_bytes


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "upload_id": upload_id,
            "url": url,
            "method": method,
            "headers": headers,
            "expires_at": expires_at,
            "max_bytes": max_bytes,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.upload_view_headers import UploadViewHeaders # noqa: PLC0415
        d = dict(src_dict)
        upload_id = d.pop("upload_id")

        url = d.pop("url")

        method = d.pop("method")

        headers = UploadViewHeaders.from_dict(d.pop("headers"))




        expires_at = d.pop("expires_at")

        max_bytes = d.pop("max_bytes")

        upload_view = cls(
            upload_id=upload_id,
            url=url,
            method=method,
            headers=headers,
            expires_at=expires_at,
            max_bytes=max_bytes,
        )


        upload_view.additional_properties = d
        return upload_view

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
