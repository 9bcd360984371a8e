from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="NewTenant")



@_attrs_define
class NewTenant:
    """ 
        Attributes:
            name (str):
            tier (None | str | Unset):
     """

    name: str
    tier: None | str | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        name = self.name

        tier: None | str | Unset
        if isinstance(self.tier, Unset):
            tier = UNSET
        else:
            tier = self.tier


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "name": name,
        })
        if tier is not UNSET:
            field_dict["tier"] = tier

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        def _parse_tier(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tier = _parse_tier(d.pop("tier", UNSET))


        new_tenant = cls(
            name=name,
            tier=tier,
        )

        return new_tenant

