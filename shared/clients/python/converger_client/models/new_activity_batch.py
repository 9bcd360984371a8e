from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.new_activity import NewActivity





T = TypeVar("T", bound="NewActivityBatch")



@_attrs_define
class NewActivityBatch:
    """ Up to 100 activities, each as `POST /api/v1/activities` takes one.

        Attributes:
            activities (list[NewActivity]): 1 to 100 activities.
     """

    activities: list[NewActivity]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.new_activity import NewActivity # noqa: PLC0415
        activities = []
        for activities_item_data in self.activities:
            activities_item = activities_item_data.to_dict()
            activities.append(activities_item)




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "activities": activities,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.new_activity import NewActivity # noqa: PLC0415
        d = dict(src_dict)
        activities = []
        _activities = d.pop("activities")
        for activities_item_data in (_activities):
            activities_item = NewActivity.from_dict(activities_item_data)



            activities.append(activities_item)


        new_activity_batch = cls(
            activities=activities,
        )


        new_activity_batch.additional_properties = d
        return new_activity_batch

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
