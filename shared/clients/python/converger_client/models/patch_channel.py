from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.patch_channel_auto_disable_type_0 import PatchChannelAutoDisableType0
  from ..models.patch_channel_circuit_breaker_type_0 import PatchChannelCircuitBreakerType0
  from ..models.patch_channel_config_type_0 import PatchChannelConfigType0
  from ..models.patch_channel_filter_type_0 import PatchChannelFilterType0
  from ..models.patch_channel_middleware_type_0_item import PatchChannelMiddlewareType0Item
  from ..models.patch_channel_retry_policy_type_0 import PatchChannelRetryPolicyType0





T = TypeVar("T", bound="PatchChannel")



@_attrs_define
class PatchChannel:
    """ 
        Attributes:
            name (None | str | Unset):
            config (None | PatchChannelConfigType0 | Unset):
            active (bool | None | Unset):
            retry_policy (None | PatchChannelRetryPolicyType0 | Unset):
            circuit_breaker (None | PatchChannelCircuitBreakerType0 | Unset):
            rate_limit (None | str | Unset):
            auto_disable (None | PatchChannelAutoDisableType0 | Unset):
            event_types (list[str] | None | Unset):
            middleware (list[PatchChannelMiddlewareType0Item] | None | Unset): Replaces the steps (`[]` removes them).
            filter_ (None | PatchChannelFilterType0 | Unset): Replaces the filter (`null` removes it).
     """

    name: None | str | Unset = UNSET
    config: None | PatchChannelConfigType0 | Unset = UNSET
    active: bool | None | Unset = UNSET
    retry_policy: None | PatchChannelRetryPolicyType0 | Unset = UNSET
    circuit_breaker: None | PatchChannelCircuitBreakerType0 | Unset = UNSET
    rate_limit: None | str | Unset = UNSET
    auto_disable: None | PatchChannelAutoDisableType0 | Unset = UNSET
    event_types: list[str] | None | Unset = UNSET
    middleware: list[PatchChannelMiddlewareType0Item] | None | Unset = UNSET
    filter_: None | PatchChannelFilterType0 | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        from ..models.patch_channel_auto_disable_type_0 import PatchChannelAutoDisableType0 # noqa: PLC0415
        from ..models.patch_channel_circuit_breaker_type_0 import PatchChannelCircuitBreakerType0 # noqa: PLC0415
        from ..models.patch_channel_config_type_0 import PatchChannelConfigType0 # noqa: PLC0415
        from ..models.patch_channel_filter_type_0 import PatchChannelFilterType0 # noqa: PLC0415
        from ..models.patch_channel_middleware_type_0_item import PatchChannelMiddlewareType0Item # noqa: PLC0415
        from ..models.patch_channel_retry_policy_type_0 import PatchChannelRetryPolicyType0 # noqa: PLC0415
        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        config: dict[str, Any] | None | Unset
        if isinstance(self.config, Unset):
            config = UNSET
        elif isinstance(self.config, PatchChannelConfigType0):
            config = self.config.to_dict()
        else:
            config = self.config

        active: bool | None | Unset
        if isinstance(self.active, Unset):
            active = UNSET
        else:
            active = self.active

        retry_policy: dict[str, Any] | None | Unset
        if isinstance(self.retry_policy, Unset):
            retry_policy = UNSET
        elif isinstance(self.retry_policy, PatchChannelRetryPolicyType0):
            retry_policy = self.retry_policy.to_dict()
        else:
            retry_policy = self.retry_policy

        circuit_breaker: dict[str, Any] | None | Unset
        if isinstance(self.circuit_breaker, Unset):
            circuit_breaker = UNSET
        elif isinstance(self.circuit_breaker, PatchChannelCircuitBreakerType0):
            circuit_breaker = self.circuit_breaker.to_dict()
        else:
            circuit_breaker = self.circuit_breaker

        rate_limit: None | str | Unset
        if isinstance(self.rate_limit, Unset):
            rate_limit = UNSET
        else:
            rate_limit = self.rate_limit

        auto_disable: dict[str, Any] | None | Unset
        if isinstance(self.auto_disable, Unset):
            auto_disable = UNSET
        elif isinstance(self.auto_disable, PatchChannelAutoDisableType0):
            auto_disable = self.auto_disable.to_dict()
        else:
            auto_disable = self.auto_disable

        event_types: list[str] | None | Unset
        if isinstance(self.event_types, Unset):
            event_types = UNSET
        elif isinstance(self.event_types, list):
            event_types = self.event_types


        else:
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
        elif isinstance(self.filter_, PatchChannelFilterType0):
            filter_ = self.filter_.to_dict()
        else:
            filter_ = self.filter_


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if name is not UNSET:
            field_dict["name"] = name
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

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.patch_channel_auto_disable_type_0 import PatchChannelAutoDisableType0 # noqa: PLC0415
        from ..models.patch_channel_circuit_breaker_type_0 import PatchChannelCircuitBreakerType0 # noqa: PLC0415
        from ..models.patch_channel_config_type_0 import PatchChannelConfigType0 # noqa: PLC0415
        from ..models.patch_channel_filter_type_0 import PatchChannelFilterType0 # noqa: PLC0415
        from ..models.patch_channel_middleware_type_0_item import PatchChannelMiddlewareType0Item # noqa: PLC0415
        from ..models.patch_channel_retry_policy_type_0 import PatchChannelRetryPolicyType0 # noqa: PLC0415
        d = dict(src_dict)
        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))


        def _parse_config(data: object) -> None | PatchChannelConfigType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                config_type_0 = PatchChannelConfigType0.from_dict(data)



                return config_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PatchChannelConfigType0 | Unset, data)

        config = _parse_config(d.pop("config", UNSET))


        def _parse_active(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        active = _parse_active(d.pop("active", UNSET))


        def _parse_retry_policy(data: object) -> None | PatchChannelRetryPolicyType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                retry_policy_type_0 = PatchChannelRetryPolicyType0.from_dict(data)



                return retry_policy_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PatchChannelRetryPolicyType0 | Unset, data)

        retry_policy = _parse_retry_policy(d.pop("retry_policy", UNSET))


        def _parse_circuit_breaker(data: object) -> None | PatchChannelCircuitBreakerType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                circuit_breaker_type_0 = PatchChannelCircuitBreakerType0.from_dict(data)



                return circuit_breaker_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PatchChannelCircuitBreakerType0 | Unset, data)

        circuit_breaker = _parse_circuit_breaker(d.pop("circuit_breaker", UNSET))


        def _parse_rate_limit(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit", UNSET))


        def _parse_auto_disable(data: object) -> None | PatchChannelAutoDisableType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                auto_disable_type_0 = PatchChannelAutoDisableType0.from_dict(data)



                return auto_disable_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PatchChannelAutoDisableType0 | Unset, data)

        auto_disable = _parse_auto_disable(d.pop("auto_disable", UNSET))


        def _parse_event_types(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                event_types_type_0 = cast(list[str], data)

                return event_types_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        event_types = _parse_event_types(d.pop("event_types", UNSET))


        def _parse_middleware(data: object) -> list[PatchChannelMiddlewareType0Item] | None | Unset:
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
                    middleware_type_0_item = PatchChannelMiddlewareType0Item.from_dict(middleware_type_0_item_data)



                    middleware_type_0.append(middleware_type_0_item)

                return middleware_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[PatchChannelMiddlewareType0Item] | None | Unset, data)

        middleware = _parse_middleware(d.pop("middleware", UNSET))


        def _parse_filter_(data: object) -> None | PatchChannelFilterType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_0 = PatchChannelFilterType0.from_dict(data)



                return filter_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PatchChannelFilterType0 | Unset, data)

        filter_ = _parse_filter_(d.pop("filter", UNSET))


        patch_channel = cls(
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
        )

        return patch_channel

