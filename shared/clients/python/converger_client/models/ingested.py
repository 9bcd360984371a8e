from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.delivery_ref import DeliveryRef





T = TypeVar("T", bound="Ingested")



@_attrs_define
class Ingested:
    """ What an ingest answers (201 for a new activity, 200 for a producer's id seen before).

        Attributes:
            activity_id (str):
            conversation_id (str):
            seq (int):
            created_at (str):
            trace_id (str): Its W3C trace id (the producer's `traceparent`'s, or one derived from its id).
            deliveries (list[DeliveryRef]):
     """

    activity_id: str
    conversation_id: str
    seq: int
    created_at: str
    trace_id: str
    deliveries: list[DeliveryRef]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.delivery_ref import DeliveryRef # noqa: PLC0415
        activity_id = self.activity_id

        conversation_id = self.conversation_id

        seq = self.seq

        created_at = self.created_at

        trace_id = self.trace_id

        deliveries = []
        for deliveries_item_data in self.deliveries:
            deliveries_item = deliveries_item_data.to_dict()
            deliveries.append(deliveries_item)




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "activity_id": activity_id,
            "conversation_id": conversation_id,
            "seq": seq,
            "created_at": created_at,
            "trace_id": trace_id,
            "deliveries": deliveries,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.delivery_ref import DeliveryRef # noqa: PLC0415
        d = dict(src_dict)
        activity_id = d.pop("activity_id")

        conversation_id = d.pop("conversation_id")

        seq = d.pop("seq")

        created_at = d.pop("created_at")

        trace_id = d.pop("trace_id")

        deliveries = []
        _deliveries = d.pop("deliveries")
        for deliveries_item_data in (_deliveries):
            deliveries_item = DeliveryRef.from_dict(deliveries_item_data)



            deliveries.append(deliveries_item)


        ingested = cls(
            activity_id=activity_id,
            conversation_id=conversation_id,
            seq=seq,
            created_at=created_at,
            trace_id=trace_id,
            deliveries=deliveries,
        )


        ingested.additional_properties = d
        return ingested

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
