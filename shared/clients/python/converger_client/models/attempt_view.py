from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="AttemptView")



@_attrs_define
class AttemptView:
    """ One attempt of a delivery.

        Attributes:
            attempt (int):
            started_at (str):
            duration_ms (int):
            trigger (str): `auto`, `manual` or `probe`.
            status_code (int | None | Unset):
            response_snippet (None | str | Unset):
            error (None | str | Unset):
            next_retry_at (None | str | Unset):
            outcome (None | str | Unset): How it ended: `delivered`, `failed` (a retry follows at `next_retry_at`), `dead`
                (the
                delivery was dead-lettered) or `pending` (handed to a client, waiting for its
                acknowledgement). Absent on entries written before outcomes were logged.
     """

    attempt: int
    started_at: str
    duration_ms: int
    trigger: str
    status_code: int | None | Unset = UNSET
    response_snippet: None | str | Unset = UNSET
    error: None | str | Unset = UNSET
    next_retry_at: None | str | Unset = UNSET
    outcome: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        attempt = self.attempt

        started_at = self.started_at

        duration_ms = self.duration_ms

        trigger = self.trigger

        status_code: int | None | Unset
        if isinstance(self.status_code, Unset):
            status_code = UNSET
        else:
            status_code = self.status_code

        response_snippet: None | str | Unset
        if isinstance(self.response_snippet, Unset):
            response_snippet = UNSET
        else:
            response_snippet = self.response_snippet

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        next_retry_at: None | str | Unset
        if isinstance(self.next_retry_at, Unset):
            next_retry_at = UNSET
        else:
            next_retry_at = self.next_retry_at

        outcome: None | str | Unset
        if isinstance(self.outcome, Unset):
            outcome = UNSET
        else:
            outcome = self.outcome


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "attempt": attempt,
            "started_at": started_at,
            "duration_ms": duration_ms,
            "trigger": trigger,
        })
        if status_code is not UNSET:
            field_dict["status_code"] = status_code
        if response_snippet is not UNSET:
            field_dict["response_snippet"] = response_snippet
        if error is not UNSET:
            field_dict["error"] = error
        if next_retry_at is not UNSET:
            field_dict["next_retry_at"] = next_retry_at
        if outcome is not UNSET:
            field_dict["outcome"] = outcome

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        attempt = d.pop("attempt")

        started_at = d.pop("started_at")

        duration_ms = d.pop("duration_ms")

        trigger = d.pop("trigger")

        def _parse_status_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        status_code = _parse_status_code(d.pop("status_code", UNSET))


        def _parse_response_snippet(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        response_snippet = _parse_response_snippet(d.pop("response_snippet", UNSET))


        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))


        def _parse_next_retry_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_retry_at = _parse_next_retry_at(d.pop("next_retry_at", UNSET))


        def _parse_outcome(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        outcome = _parse_outcome(d.pop("outcome", UNSET))


        attempt_view = cls(
            attempt=attempt,
            started_at=started_at,
            duration_ms=duration_ms,
            trigger=trigger,
            status_code=status_code,
            response_snippet=response_snippet,
            error=error,
            next_retry_at=next_retry_at,
            outcome=outcome,
        )


        attempt_view.additional_properties = d
        return attempt_view

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
