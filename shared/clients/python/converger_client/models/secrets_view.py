from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.retiring_secret_view import RetiringSecretView





T = TypeVar("T", bound="SecretsView")



@_attrs_define
class SecretsView:
    """ A channel's signing secrets: every request carries one `v1,` signature per secret.

        Attributes:
            signing_secret (str): The current secret (`whsec_` base64).
            retiring (list[RetiringSecretView]): Older secrets still signing during their grace.
     """

    signing_secret: str
    retiring: list[RetiringSecretView]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.retiring_secret_view import RetiringSecretView # noqa: PLC0415
        signing_secret = self.signing_secret

        retiring = []
        for retiring_item_data in self.retiring:
            retiring_item = retiring_item_data.to_dict()
            retiring.append(retiring_item)




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "signing_secret": signing_secret,
            "retiring": retiring,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.retiring_secret_view import RetiringSecretView # noqa: PLC0415
        d = dict(src_dict)
        signing_secret = d.pop("signing_secret")

        retiring = []
        _retiring = d.pop("retiring")
        for retiring_item_data in (_retiring):
            retiring_item = RetiringSecretView.from_dict(retiring_item_data)



            retiring.append(retiring_item)


        secrets_view = cls(
            signing_secret=signing_secret,
            retiring=retiring,
        )


        secrets_view.additional_properties = d
        return secrets_view

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
