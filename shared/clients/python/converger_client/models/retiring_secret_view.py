from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="RetiringSecretView")



@_attrs_define
class RetiringSecretView:
    """ A secret a rotation replaced, still signing beside the new one.

        Attributes:
            signing_secret (str):
            signs_until (str): When it stops signing.
     """

    signing_secret: str
    signs_until: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        signing_secret = self.signing_secret

        signs_until = self.signs_until


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "signing_secret": signing_secret,
            "signs_until": signs_until,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        signing_secret = d.pop("signing_secret")

        signs_until = d.pop("signs_until")

        retiring_secret_view = cls(
            signing_secret=signing_secret,
            signs_until=signs_until,
        )


        retiring_secret_view.additional_properties = d
        return retiring_secret_view

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
