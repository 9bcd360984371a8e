from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="DeliveryState")



@_attrs_define
class DeliveryState:
    """ A channel's flow state: breaker, window and what waits.

        Attributes:
            state (str): `active`, `paused`, `open`, `half_open`, ...
            circuit_state (str): `closed`, `open`, `half_open` or `paused`.
            consecutive_failures (int):
            in_flight (int):
            parked (int):
            backlog (int):
            circuit_changed_at (None | str | Unset):
            window (int | None | Unset):
            max_in_flight (int | None | Unset):
            rate_limit (None | str | Unset):
     """

    state: str
    circuit_state: str
    consecutive_failures: int
    in_flight: int
    parked: int
    backlog: int
    circuit_changed_at: None | str | Unset = UNSET
    window: int | None | Unset = UNSET
    max_in_flight: int | None | Unset = UNSET
    rate_limit: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        state = self.state

        circuit_state = self.circuit_state

        consecutive_failures = self.consecutive_failures

        in_flight = self.in_flight

        parked = self.parked

        backlog = self.backlog

        circuit_changed_at: None | str | Unset
        if isinstance(self.circuit_changed_at, Unset):
            circuit_changed_at = UNSET
        else:
            circuit_changed_at = self.circuit_changed_at

        window: int | None | Unset
        if isinstance(self.window, Unset):
            window = UNSET
        else:
            window = self.window

        max_in_flight: int | None | Unset
        if isinstance(self.max_in_flight, Unset):
            max_in_flight = UNSET
        else:
            max_in_flight = self.max_in_flight

        rate_limit: None | str | Unset
        if isinstance(self.rate_limit, Unset):
            rate_limit = UNSET
        else:
            rate_limit = self.rate_limit


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "state": state,
            "circuit_state": circuit_state,
            "consecutive_failures": consecutive_failures,
            "in_flight": in_flight,
            "parked": parked,
            "backlog": backlog,
        })
        if circuit_changed_at is not UNSET:
            field_dict["circuit_changed_at"] = circuit_changed_at
        if window is not UNSET:
            field_dict["window"] = window
        if max_in_flight is not UNSET:
            field_dict["max_in_flight"] = max_in_flight
        if rate_limit is not UNSET:
            field_dict["rate_limit"] = rate_limit

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        state = d.pop("state")

        circuit_state = d.pop("circuit_state")

        consecutive_failures = d.pop("consecutive_failures")

        in_flight = d.pop("in_flight")

        parked = d.pop("parked")

        backlog = d.pop("backlog")

        def _parse_circuit_changed_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        circuit_changed_at = _parse_circuit_changed_at(d.pop("circuit_changed_at", UNSET))


        def _parse_window(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        window = _parse_window(d.pop("window", UNSET))


        def _parse_max_in_flight(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_in_flight = _parse_max_in_flight(d.pop("max_in_flight", UNSET))


        def _parse_rate_limit(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit", UNSET))


        delivery_state = cls(
            state=state,
            circuit_state=circuit_state,
            consecutive_failures=consecutive_failures,
            in_flight=in_flight,
            parked=parked,
            backlog=backlog,
            circuit_changed_at=circuit_changed_at,
            window=window,
            max_in_flight=max_in_flight,
            rate_limit=rate_limit,
        )


        delivery_state.additional_properties = d
        return delivery_state

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
