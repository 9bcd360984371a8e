from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="NewUser")



@_attrs_define
class NewUser:
    """ 
        Attributes:
            realm (str): `admin` (operators) or `portal` (a tenant's users). Example: admin.
            email (str):
            password (str):
            role (str):
            tenant_id (None | str | Unset):
     """

    realm: str
    email: str
    password: str
    role: str
    tenant_id: None | str | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        realm = self.realm

        email = self.email

        password = self.password

        role = self.role

        tenant_id: None | str | Unset
        if isinstance(self.tenant_id, Unset):
            tenant_id = UNSET
        else:
            tenant_id = self.tenant_id


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "realm": realm,
            "email": email,
            "password": password,
            "role": role,
        })
        if tenant_id is not UNSET:
            field_dict["tenant_id"] = tenant_id

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        realm = d.pop("realm")

        email = d.pop("email")

        password = d.pop("password")

        role = d.pop("role")

        def _parse_tenant_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tenant_id = _parse_tenant_id(d.pop("tenant_id", UNSET))


        new_user = cls(
            realm=realm,
            email=email,
            password=password,
            role=role,
            tenant_id=tenant_id,
        )

        return new_user

