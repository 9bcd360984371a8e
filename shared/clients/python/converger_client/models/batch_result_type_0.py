from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.ingested import Ingested





T = TypeVar("T", bound="BatchResultType0")



@_attrs_define
class BatchResultType0:
    """ 
        Attributes:
            status (int):
            activity (Ingested): What an ingest answers (201 for a new activity, 200 for a producer's id seen before).
     """

    status: int
    activity: Ingested
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.ingested import Ingested # noqa: PLC0415
        status = self.status

        activity = self.activity.to_dict()


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "status": status,
            "activity": activity,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.ingested import Ingested # noqa: PLC0415
        d = dict(src_dict)
        status = d.pop("status")

        activity = Ingested.from_dict(d.pop("activity"))




        batch_result_type_0 = cls(
            status=status,
            activity=activity,
        )


        batch_result_type_0.additional_properties = d
        return batch_result_type_0

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
