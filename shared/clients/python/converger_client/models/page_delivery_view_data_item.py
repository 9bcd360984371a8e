from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.attempt_view import AttemptView
  from ..models.lane_view import LaneView





T = TypeVar("T", bound="PageDeliveryViewDataItem")



@_attrs_define
class PageDeliveryViewDataItem:
    """ A delivery: one activity to one channel, and how its attempts went.

        Attributes:
            id (str):
            tenant_id (str):
            channel_id (str):
            activity_id (str):
            conversation_id (str):
            status (str): `pending`, `sent`, `delivered`, `read` or `failed`.
            tier (str):
            waiting_for_slot (bool): Pending, waiting for a slot of the channel's window.
            awaiting_ack (bool): Handed to a client that has not acknowledged it yet.
            attempts (int):
            retry_count (int):
            created_at (str):
            updated_at (str):
            event_type (None | str | Unset): Its activity's event type (absent when the activity has none, and on deliveries
                created before event types were kept on them).
            last_error (None | str | Unset):
            next_attempt_at (None | str | Unset): When a waiting delivery is attempted next.
            sent_at (None | str | Unset):
            provider_message_id (None | str | Unset):
            response_status (int | None | Unset):
            retried_by (None | str | Unset):
            retried_at (None | str | Unset):
            attempt_log (list[AttemptView] | None | Unset): The recent attempts, newest first (in a read of one delivery,
                not in a list).
            lane (LaneView | None | Unset):
     """

    id: str
    tenant_id: str
    channel_id: str
    activity_id: str
    conversation_id: str
    status: str
    tier: str
    waiting_for_slot: bool
    awaiting_ack: bool
    attempts: int
    retry_count: int
    created_at: str
    updated_at: str
    event_type: None | str | Unset = UNSET
    last_error: None | str | Unset = UNSET
    next_attempt_at: None | str | Unset = UNSET
    sent_at: None | str | Unset = UNSET
    provider_message_id: None | str | Unset = UNSET
    response_status: int | None | Unset = UNSET
    retried_by: None | str | Unset = UNSET
    retried_at: None | str | Unset = UNSET
    attempt_log: list[AttemptView] | None | Unset = UNSET
    lane: LaneView | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.attempt_view import AttemptView # noqa: PLC0415
        from ..models.lane_view import LaneView # noqa: PLC0415
        id = self.id

        tenant_id = self.tenant_id

        channel_id = self.channel_id

        activity_id = self.activity_id

        conversation_id = self.conversation_id

        status = self.status

        tier = self.tier

        waiting_for_slot = self.waiting_for_slot

        awaiting_ack = self.awaiting_ack

        attempts = self.attempts

        retry_count = self.retry_count

        created_at = self.created_at

        updated_at = self.updated_at

        event_type: None | str | Unset
        if isinstance(self.event_type, Unset):
            event_type = UNSET
        else:
            event_type = self.event_type

        last_error: None | str | Unset
        if isinstance(self.last_error, Unset):
            last_error = UNSET
        else:
            last_error = self.last_error

        next_attempt_at: None | str | Unset
        if isinstance(self.next_attempt_at, Unset):
            next_attempt_at = UNSET
        else:
            next_attempt_at = self.next_attempt_at

        sent_at: None | str | Unset
        if isinstance(self.sent_at, Unset):
            sent_at = UNSET
        else:
            sent_at = self.sent_at

        provider_message_id: None | str | Unset
        if isinstance(self.provider_message_id, Unset):
            provider_message_id = UNSET
        else:
            provider_message_id = self.provider_message_id

        response_status: int | None | Unset
        if isinstance(self.response_status, Unset):
            response_status = UNSET
        else:
            response_status = self.response_status

        retried_by: None | str | Unset
        if isinstance(self.retried_by, Unset):
            retried_by = UNSET
        else:
            retried_by = self.retried_by

        retried_at: None | str | Unset
        if isinstance(self.retried_at, Unset):
            retried_at = UNSET
        else:
            retried_at = self.retried_at

        attempt_log: list[dict[str, Any]] | None | Unset
        if isinstance(self.attempt_log, Unset):
            attempt_log = UNSET
        elif isinstance(self.attempt_log, list):
            attempt_log = []
            for attempt_log_type_0_item_data in self.attempt_log:
                attempt_log_type_0_item = attempt_log_type_0_item_data.to_dict()
                attempt_log.append(attempt_log_type_0_item)


        else:
            attempt_log = self.attempt_log

        lane: dict[str, Any] | None | Unset
        if isinstance(self.lane, Unset):
            lane = UNSET
        elif isinstance(self.lane, LaneView):
            lane = self.lane.to_dict()
        else:
            lane = self.lane


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "id": id,
            "tenant_id": tenant_id,
            "channel_id": channel_id,
            "activity_id": activity_id,
            "conversation_id": conversation_id,
            "status": status,
            "tier": tier,
            "waiting_for_slot": waiting_for_slot,
            "awaiting_ack": awaiting_ack,
            "attempts": attempts,
            "retry_count": retry_count,
            "created_at": created_at,
            "updated_at": updated_at,
        })
        if event_type is not UNSET:
            field_dict["event_type"] = event_type
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if next_attempt_at is not UNSET:
            field_dict["next_attempt_at"] = next_attempt_at
        if sent_at is not UNSET:
            field_dict["sent_at"] = sent_at
        if provider_message_id is not UNSET:
            field_dict["provider_message_id"] = provider_message_id
        if response_status is not UNSET:
            field_dict["response_status"] = response_status
        if retried_by is not UNSET:
            field_dict["retried_by"] = retried_by
        if retried_at is not UNSET:
            field_dict["retried_at"] = retried_at
        if attempt_log is not UNSET:
            field_dict["attempt_log"] = attempt_log
        if lane is not UNSET:
            field_dict["lane"] = lane

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.attempt_view import AttemptView # noqa: PLC0415
        from ..models.lane_view import LaneView # noqa: PLC0415
        d = dict(src_dict)
        id = d.pop("id")

        tenant_id = d.pop("tenant_id")

        channel_id = d.pop("channel_id")

        activity_id = d.pop("activity_id")

        conversation_id = d.pop("conversation_id")

        status = d.pop("status")

        tier = d.pop("tier")

        waiting_for_slot = d.pop("waiting_for_slot")

        awaiting_ack = d.pop("awaiting_ack")

        attempts = d.pop("attempts")

        retry_count = d.pop("retry_count")

        created_at = d.pop("created_at")

        updated_at = d.pop("updated_at")

        def _parse_event_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        event_type = _parse_event_type(d.pop("event_type", UNSET))


        def _parse_last_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_error = _parse_last_error(d.pop("last_error", UNSET))


        def _parse_next_attempt_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_attempt_at = _parse_next_attempt_at(d.pop("next_attempt_at", UNSET))


        def _parse_sent_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        sent_at = _parse_sent_at(d.pop("sent_at", UNSET))


        def _parse_provider_message_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        provider_message_id = _parse_provider_message_id(d.pop("provider_message_id", UNSET))


        def _parse_response_status(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        response_status = _parse_response_status(d.pop("response_status", UNSET))


        def _parse_retried_by(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        retried_by = _parse_retried_by(d.pop("retried_by", UNSET))


        def _parse_retried_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        retried_at = _parse_retried_at(d.pop("retried_at", UNSET))


        def _parse_attempt_log(data: object) -> list[AttemptView] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                attempt_log_type_0 = []
                _attempt_log_type_0 = data
                for attempt_log_type_0_item_data in (_attempt_log_type_0):
                    attempt_log_type_0_item = AttemptView.from_dict(attempt_log_type_0_item_data)



                    attempt_log_type_0.append(attempt_log_type_0_item)

                return attempt_log_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[AttemptView] | None | Unset, data)

        attempt_log = _parse_attempt_log(d.pop("attempt_log", UNSET))


        def _parse_lane(data: object) -> LaneView | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                lane_type_1 = LaneView.from_dict(data)



                return lane_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LaneView | None | Unset, data)

        lane = _parse_lane(d.pop("lane", UNSET))


        page_delivery_view_data_item = cls(
            id=id,
            tenant_id=tenant_id,
            channel_id=channel_id,
            activity_id=activity_id,
            conversation_id=conversation_id,
            status=status,
            tier=tier,
            waiting_for_slot=waiting_for_slot,
            awaiting_ack=awaiting_ack,
            attempts=attempts,
            retry_count=retry_count,
            created_at=created_at,
            updated_at=updated_at,
            event_type=event_type,
            last_error=last_error,
            next_attempt_at=next_attempt_at,
            sent_at=sent_at,
            provider_message_id=provider_message_id,
            response_status=response_status,
            retried_by=retried_by,
            retried_at=retried_at,
            attempt_log=attempt_log,
            lane=lane,
        )


        page_delivery_view_data_item.additional_properties = d
        return page_delivery_view_data_item

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
