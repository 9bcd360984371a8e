from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="NewActivity")



@_attrs_define
class NewActivity:
    """ An activity to deliver: to `channel_ids`, or by `event_type` to every active channel of
    the tenant subscribed to it.

        Attributes:
            conversation_id (str): 1 to 256 characters.
            id (None | str | Unset): The producer's id: sending it again creates nothing new.
            seq (int | None | Unset): Its position in the conversation; the next one when absent.
            channel_ids (list[str] | None | Unset): 1 to 50 channels; may be left out with an `event_type`.
            event_type (None | str | Unset): 1 to 100 letters, digits, `.`, `_`, `-` or `:`.
            payload (Any | Unset): Any JSON value: up to 10 MiB serialized where the deployment has a payload bucket
                (256 KiB without one), and up to what a request carries (5 MiB) inline. Required
                unless `payload_upload` is given.
            payload_upload (None | str | Unset): An upload from `POST /api/v1/payloads` that is the payload (a JSON document
                of up to
                10 MiB), instead of `payload`.
            traceparent (None | str | Unset): A W3C `traceparent` (a batch item's own; a single activity's may come as the
                request's `traceparent` header instead): every delivery's request is a span of this
                trace. One that does not parse is ignored and a new trace starts.
            tracestate (None | str | Unset): The W3C `tracestate` that goes with it (at most 512 characters), passed on as
                sent.
     """

    conversation_id: str
    id: None | str | Unset = UNSET
    seq: int | None | Unset = UNSET
    channel_ids: list[str] | None | Unset = UNSET
    event_type: None | str | Unset = UNSET
    payload: Any | Unset = UNSET
    payload_upload: None | str | Unset = UNSET
    traceparent: None | str | Unset = UNSET
    tracestate: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        conversation_id = self.conversation_id

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        else:
            id = self.id

        seq: int | None | Unset
        if isinstance(self.seq, Unset):
            seq = UNSET
        else:
            seq = self.seq

        channel_ids: list[str] | None | Unset
        if isinstance(self.channel_ids, Unset):
            channel_ids = UNSET
        elif isinstance(self.channel_ids, list):
            channel_ids = self.channel_ids


        else:
            channel_ids = self.channel_ids

        event_type: None | str | Unset
        if isinstance(self.event_type, Unset):
            event_type = UNSET
        else:
            event_type = self.event_type

        payload = self.payload

        payload_upload: None | str | Unset
        if isinstance(self.payload_upload, Unset):
            payload_upload = UNSET
        else:
            payload_upload = self.payload_upload

        traceparent: None | str | Unset
        if isinstance(self.traceparent, Unset):
            traceparent = UNSET
        else:
            traceparent = self.traceparent

        tracestate: None | str | Unset
        if isinstance(self.tracestate, Unset):
            tracestate = UNSET
        else:
            tracestate = self.tracestate


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "conversation_id": conversation_id,
        })
        if id is not UNSET:
            field_dict["id"] = id
        if seq is not UNSET:
            field_dict["seq"] = seq
        if channel_ids is not UNSET:
            field_dict["channel_ids"] = channel_ids
        if event_type is not UNSET:
            field_dict["event_type"] = event_type
        if payload is not UNSET:
            field_dict["payload"] = payload
        if payload_upload is not UNSET:
            field_dict["payload_upload"] = payload_upload
        if traceparent is not UNSET:
            field_dict["traceparent"] = traceparent
        if tracestate is not UNSET:
            field_dict["tracestate"] = tracestate

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        conversation_id = d.pop("conversation_id")

        def _parse_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        id = _parse_id(d.pop("id", UNSET))


        def _parse_seq(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        seq = _parse_seq(d.pop("seq", UNSET))


        def _parse_channel_ids(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                channel_ids_type_0 = cast(list[str], data)

                return channel_ids_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        channel_ids = _parse_channel_ids(d.pop("channel_ids", UNSET))


        def _parse_event_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        event_type = _parse_event_type(d.pop("event_type", UNSET))


        payload = d.pop("payload", UNSET)

        def _parse_payload_upload(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        payload_upload = _parse_payload_upload(d.pop("payload_upload", UNSET))


        def _parse_traceparent(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        traceparent = _parse_traceparent(d.pop("traceparent", UNSET))


        def _parse_tracestate(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tracestate = _parse_tracestate(d.pop("tracestate", UNSET))


        new_activity = cls(
            conversation_id=conversation_id,
            id=id,
            seq=seq,
            channel_ids=channel_ids,
            event_type=event_type,
            payload=payload,
            payload_upload=payload_upload,
            traceparent=traceparent,
            tracestate=tracestate,
        )


        new_activity.additional_properties = d
        return new_activity

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
