from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.new_channel_auto_disable import NewChannelAutoDisable
  from ..models.new_channel_circuit_breaker import NewChannelCircuitBreaker
  from ..models.new_channel_config import NewChannelConfig
  from ..models.new_channel_filter_type_0 import NewChannelFilterType0
  from ..models.new_channel_middleware_type_0_item import NewChannelMiddlewareType0Item
  from ..models.new_channel_ordering_type_0 import NewChannelOrderingType0
  from ..models.new_channel_retry_policy import NewChannelRetryPolicy





T = TypeVar("T", bound="NewChannel")



@_attrs_define
class NewChannel:
    """ 
        Attributes:
            type_ (str):
            name (str): 1 to 200 characters, no control characters.
            config (NewChannelConfig | Unset):
            active (bool | Unset):
            retry_policy (NewChannelRetryPolicy | Unset):
            circuit_breaker (NewChannelCircuitBreaker | Unset):
            rate_limit (None | str | Unset):
            auto_disable (NewChannelAutoDisable | Unset):
            event_types (list[str] | Unset):
            middleware (list[NewChannelMiddlewareType0Item] | None | Unset): Steps applied to each delivery's copy of the
                payload, in order (at most 10).
            filter_ (NewChannelFilterType0 | None | Unset): Which activities it wants (`docs/channels/filters.md`):
                `{"payload": {"kind": "order"}}`. One
                it does not want is recorded `filtered` and never sent.
            ordering (NewChannelOrderingType0 | None | Unset): Ordered lanes: `{"by": "conversation", "on_dead_letter":
                "hold" | "skip"}` delivers
                each conversation's activities one at a time, in `seq` order. Set at creation only.
     """

    type_: str
    name: str
    config: NewChannelConfig | Unset = UNSET
    active: bool | Unset = UNSET
    retry_policy: NewChannelRetryPolicy | Unset = UNSET
    circuit_breaker: NewChannelCircuitBreaker | Unset = UNSET
    rate_limit: None | str | Unset = UNSET
    auto_disable: NewChannelAutoDisable | Unset = UNSET
    event_types: list[str] | Unset = UNSET
    middleware: list[NewChannelMiddlewareType0Item] | None | Unset = UNSET
    filter_: NewChannelFilterType0 | None | Unset = UNSET
    ordering: NewChannelOrderingType0 | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        from ..models.new_channel_auto_disable import NewChannelAutoDisable # noqa: PLC0415
        from ..models.new_channel_circuit_breaker import NewChannelCircuitBreaker # noqa: PLC0415
        from ..models.new_channel_config import NewChannelConfig # noqa: PLC0415
        from ..models.new_channel_filter_type_0 import NewChannelFilterType0 # noqa: PLC0415
        from ..models.new_channel_middleware_type_0_item import NewChannelMiddlewareType0Item # noqa: PLC0415
        from ..models.new_channel_ordering_type_0 import NewChannelOrderingType0 # noqa: PLC0415
        from ..models.new_channel_retry_policy import NewChannelRetryPolicy # noqa: PLC0415
        type_ = self.type_

        name = self.name

        config: dict[str, Any] | Unset = UNSET
        if not isinstance(self.config, Unset):
            config = self.config.to_dict()

        active = self.active

        retry_policy: dict[str, Any] | Unset = UNSET
        if not isinstance(self.retry_policy, Unset):
            retry_policy = self.retry_policy.to_dict()

        circuit_breaker: dict[str, Any] | Unset = UNSET
        if not isinstance(self.circuit_breaker, Unset):
            circuit_breaker = self.circuit_breaker.to_dict()

        rate_limit: None | str | Unset
        if isinstance(self.rate_limit, Unset):
            rate_limit = UNSET
        else:
            rate_limit = self.rate_limit

        auto_disable: dict[str, Any] | Unset = UNSET
        if not isinstance(self.auto_disable, Unset):
            auto_disable = self.auto_disable.to_dict()

        event_types: list[str] | Unset = UNSET
        if not isinstance(self.event_types, Unset):
            event_types = self.event_types



        middleware: list[dict[str, Any]] | None | Unset
        if isinstance(self.middleware, Unset):
            middleware = UNSET
        elif isinstance(self.middleware, list):
            middleware = []
            for middleware_type_0_item_data in self.middleware:
                middleware_type_0_item = middleware_type_0_item_data.to_dict()
                middleware.append(middleware_type_0_item)


        else:
            middleware = self.middleware

        filter_: dict[str, Any] | None | Unset
        if isinstance(self.filter_, Unset):
            filter_ = UNSET
        elif isinstance(self.filter_, NewChannelFilterType0):
            filter_ = self.filter_.to_dict()
        else:
            filter_ = self.filter_

        ordering: dict[str, Any] | None | Unset
        if isinstance(self.ordering, Unset):
            ordering = UNSET
        elif isinstance(self.ordering, NewChannelOrderingType0):
            ordering = self.ordering.to_dict()
        else:
            ordering = self.ordering


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "type": type_,
            "name": name,
        })
        if config is not UNSET:
            field_dict["config"] = config
        if active is not UNSET:
            field_dict["active"] = active
        if retry_policy is not UNSET:
            field_dict["retry_policy"] = retry_policy
        if circuit_breaker is not UNSET:
            field_dict["circuit_breaker"] = circuit_breaker
        if rate_limit is not UNSET:
            field_dict["rate_limit"] = rate_limit
        if auto_disable is not UNSET:
            field_dict["auto_disable"] = auto_disable
        if event_types is not UNSET:
            field_dict["event_types"] = event_types
        if middleware is not UNSET:
            field_dict["middleware"] = middleware
        if filter_ is not UNSET:
            field_dict["filter"] = filter_
        if ordering is not UNSET:
            field_dict["ordering"] = ordering

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.new_channel_auto_disable import NewChannelAutoDisable # noqa: PLC0415
        from ..models.new_channel_circuit_breaker import NewChannelCircuitBreaker # noqa: PLC0415
        from ..models.new_channel_config import NewChannelConfig # noqa: PLC0415
        from ..models.new_channel_filter_type_0 import NewChannelFilterType0 # noqa: PLC0415
        from ..models.new_channel_middleware_type_0_item import NewChannelMiddlewareType0Item # noqa: PLC0415
        from ..models.new_channel_ordering_type_0 import NewChannelOrderingType0 # noqa: PLC0415
        from ..models.new_channel_retry_policy import NewChannelRetryPolicy # noqa: PLC0415
        d = dict(src_dict)
        type_ = d.pop("type")

        name = d.pop("name")

        _config = d.pop("config", UNSET)
        config: NewChannelConfig | Unset
        if isinstance(_config,  Unset):
            config = UNSET
        else:
            config = NewChannelConfig.from_dict(_config)




        active = d.pop("active", UNSET)

        _retry_policy = d.pop("retry_policy", UNSET)
        retry_policy: NewChannelRetryPolicy | Unset
        if isinstance(_retry_policy,  Unset):
            retry_policy = UNSET
        else:
            retry_policy = NewChannelRetryPolicy.from_dict(_retry_policy)




        _circuit_breaker = d.pop("circuit_breaker", UNSET)
        circuit_breaker: NewChannelCircuitBreaker | Unset
        if isinstance(_circuit_breaker,  Unset):
            circuit_breaker = UNSET
        else:
            circuit_breaker = NewChannelCircuitBreaker.from_dict(_circuit_breaker)




        def _parse_rate_limit(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit", UNSET))


        _auto_disable = d.pop("auto_disable", UNSET)
        auto_disable: NewChannelAutoDisable | Unset
        if isinstance(_auto_disable,  Unset):
            auto_disable = UNSET
        else:
            auto_disable = NewChannelAutoDisable.from_dict(_auto_disable)




        event_types = cast(list[str], d.pop("event_types", UNSET))


        def _parse_middleware(data: object) -> list[NewChannelMiddlewareType0Item] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                middleware_type_0 = []
                _middleware_type_0 = data
                for middleware_type_0_item_data in (_middleware_type_0):
                    middleware_type_0_item = NewChannelMiddlewareType0Item.from_dict(middleware_type_0_item_data)



                    middleware_type_0.append(middleware_type_0_item)

                return middleware_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[NewChannelMiddlewareType0Item] | None | Unset, data)

        middleware = _parse_middleware(d.pop("middleware", UNSET))


        def _parse_filter_(data: object) -> NewChannelFilterType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_0 = NewChannelFilterType0.from_dict(data)



                return filter_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NewChannelFilterType0 | None | Unset, data)

        filter_ = _parse_filter_(d.pop("filter", UNSET))


        def _parse_ordering(data: object) -> NewChannelOrderingType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                ordering_type_0 = NewChannelOrderingType0.from_dict(data)



                return ordering_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NewChannelOrderingType0 | None | Unset, data)

        ordering = _parse_ordering(d.pop("ordering", UNSET))


        new_channel = cls(
            type_=type_,
            name=name,
            config=config,
            active=active,
            retry_policy=retry_policy,
            circuit_breaker=circuit_breaker,
            rate_limit=rate_limit,
            auto_disable=auto_disable,
            event_types=event_types,
            middleware=middleware,
            filter_=filter_,
            ordering=ordering,
        )

        return new_channel

