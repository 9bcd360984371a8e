from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="Rotate")



@_attrs_define
class Rotate:
    """ 
        Attributes:
            signing_secret (None | str | Unset): The new secret (`whsec_` base64 of 24 to 64 bytes); a random one when
                absent.
            grace_seconds (int | None | Unset): How long the old secret keeps signing beside the new one (default 24 h, at
                most 7 days).
     """

    signing_secret: None | str | Unset = UNSET
    grace_seconds: int | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        signing_secret: None | str | Unset
        if isinstance(self.signing_secret, Unset):
            signing_secret = UNSET
        else:
            signing_secret = self.signing_secret

        grace_seconds: int | None | Unset
        if isinstance(self.grace_seconds, Unset):
            grace_seconds = UNSET
        else:
            grace_seconds = self.grace_seconds


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if signing_secret is not UNSET:
            field_dict["signing_secret"] = signing_secret
        if grace_seconds is not UNSET:
            field_dict["grace_seconds"] = grace_seconds

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        def _parse_signing_secret(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        signing_secret = _parse_signing_secret(d.pop("signing_secret", UNSET))


        def _parse_grace_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        grace_seconds = _parse_grace_seconds(d.pop("grace_seconds", UNSET))


        rotate = cls(
            signing_secret=signing_secret,
            grace_seconds=grace_seconds,
        )

        return rotate

