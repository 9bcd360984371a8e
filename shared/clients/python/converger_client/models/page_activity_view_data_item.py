from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.delivery_ref import DeliveryRef





T = TypeVar("T", bound="PageActivityViewDataItem")



@_attrs_define
class PageActivityViewDataItem:
    """ An activity as its producer sent it.

        Attributes:
            id (str):
            conversation_id (str):
            seq (int):
            channel_ids (list[str]):
            payload (Any): The payload as sent (any JSON value); `null` in a list when the payload bucket keeps
                it, and in a read of one activity when it is over 1 MiB: `payload_url` reads it.
            created_at (str):
            trace_id (str): Its W3C trace id: the producer's `traceparent`'s, or one derived from the activity's
                id. Every delivery's request carries it in its own `traceparent`.
            event_type (None | str | Unset):
            payload_bytes (int | None | Unset): The payload's size, when the payload bucket keeps it (over 16 KiB).
            payload_url (None | str | Unset): A URL that reads the payload for 15 minutes, when the payload bucket keeps it.
            deliveries (list[DeliveryRef] | None | Unset): Its deliveries (in a read of one activity, not in a list).
     """

    id: str
    conversation_id: str
    seq: int
    channel_ids: list[str]
    payload: Any
    created_at: str
    trace_id: str
    event_type: None | str | Unset = UNSET
    payload_bytes: int | None | Unset = UNSET
    payload_url: None | str | Unset = UNSET
    deliveries: list[DeliveryRef] | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.delivery_ref import DeliveryRef # noqa: PLC0415
        id = self.id

        conversation_id = self.conversation_id

        seq = self.seq

        channel_ids = self.channel_ids



        payload = self.payload

        created_at = self.created_at

        trace_id = self.trace_id

        event_type: None | str | Unset
        if isinstance(self.event_type, Unset):
            event_type = UNSET
        else:
            event_type = self.event_type

        payload_bytes: int | None | Unset
        if isinstance(self.payload_bytes, Unset):
            payload_bytes = UNSET
        else:
            payload_bytes = self.payload_bytes

        payload_url: None | str | Unset
        if isinstance(self.payload_url, Unset):
            payload_url = UNSET
        else:
            payload_url = self.payload_url

        deliveries: list[dict[str, Any]] | None | Unset
        if isinstance(self.deliveries, Unset):
            deliveries = UNSET
        elif isinstance(self.deliveries, list):
            deliveries = []
            for deliveries_type_0_item_data in self.deliveries:
                deliveries_type_0_item = deliveries_type_0_item_data.to_dict()
                deliveries.append(deliveries_type_0_item)


        else:
            deliveries = self.deliveries


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "id": id,
            "conversation_id": conversation_id,
            "seq": seq,
            "channel_ids": channel_ids,
            "payload": payload,
            "created_at": created_at,
            "trace_id": trace_id,
        })
        if event_type is not UNSET:
            field_dict["event_type"] = event_type
        if payload_bytes is not UNSET:
            field_dict["payload_bytes"] = payload_bytes
        if payload_url is not UNSET:
            field_dict["payload_url"] = payload_url
        if deliveries is not UNSET:
            field_dict["deliveries"] = deliveries

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.delivery_ref import DeliveryRef # noqa: PLC0415
        d = dict(src_dict)
        id = d.pop("id")

        conversation_id = d.pop("conversation_id")

        seq = d.pop("seq")

        channel_ids = cast(list[str], d.pop("channel_ids"))


        payload = d.pop("payload")

        created_at = d.pop("created_at")

        trace_id = d.pop("trace_id")

        def _parse_event_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        event_type = _parse_event_type(d.pop("event_type", UNSET))


        def _parse_payload_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        payload_bytes = _parse_payload_bytes(d.pop("payload_bytes", UNSET))


        def _parse_payload_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        payload_url = _parse_payload_url(d.pop("payload_url", UNSET))


        def _parse_deliveries(data: object) -> list[DeliveryRef] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                deliveries_type_0 = []
                _deliveries_type_0 = data
                for deliveries_type_0_item_data in (_deliveries_type_0):
                    deliveries_type_0_item = DeliveryRef.from_dict(deliveries_type_0_item_data)



                    deliveries_type_0.append(deliveries_type_0_item)

                return deliveries_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[DeliveryRef] | None | Unset, data)

        deliveries = _parse_deliveries(d.pop("deliveries", UNSET))


        page_activity_view_data_item = cls(
            id=id,
            conversation_id=conversation_id,
            seq=seq,
            channel_ids=channel_ids,
            payload=payload,
            created_at=created_at,
            trace_id=trace_id,
            event_type=event_type,
            payload_bytes=payload_bytes,
            payload_url=payload_url,
            deliveries=deliveries,
        )


        page_activity_view_data_item.additional_properties = d
        return page_activity_view_data_item

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
