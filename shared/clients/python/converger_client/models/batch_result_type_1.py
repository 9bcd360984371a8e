from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.item_error import ItemError





T = TypeVar("T", bound="BatchResultType1")



@_attrs_define
class BatchResultType1:
    """ 
        Attributes:
            status (int):
            error (ItemError): An item's refusal: a stable code (as `ErrorCode`) and a message for people.
     """

    status: int
    error: ItemError
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.item_error import ItemError # noqa: PLC0415
        status = self.status

        error = self.error.to_dict()


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "status": status,
            "error": error,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.item_error import ItemError # noqa: PLC0415
        d = dict(src_dict)
        status = d.pop("status")

        error = ItemError.from_dict(d.pop("error"))




        batch_result_type_1 = cls(
            status=status,
            error=error,
        )


        batch_result_type_1.additional_properties = d
        return batch_result_type_1

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
