from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.channel_view_config import ChannelViewConfig
  from ..models.channel_view_filter_type_0 import ChannelViewFilterType0
  from ..models.channel_view_middleware_item import ChannelViewMiddlewareItem
  from ..models.channel_view_ordering_type_0 import ChannelViewOrderingType0
  from ..models.channel_view_retry_policy import ChannelViewRetryPolicy





T = TypeVar("T", bound="CreatedChannel")



@_attrs_define
class CreatedChannel:
    """ A channel just created: with its signing secret (also readable later through
    `GET /api/v1/channels/{id}/secret`).

        Attributes:
            id (str):
            tenant_id (str):
            type_ (str): `webhook`, `echo`, `whatsapp_meta`, `whatsapp_infobip`, `websocket`, `slack` or `email`.
            name (str):
            config (ChannelViewConfig): The adapter's settings; secrets in it (tokens, keys, an Authorization header) are
                shown as `[REDACTED]`.
            active (bool):
            retry_policy (ChannelViewRetryPolicy): The channel's retry policy overrides.
            circuit_breaker (Any): The effective breaker and window settings.
            auto_disable (Any): The effective auto-disable settings.
            managed (bool): The platform's alert channel of the tenant (changed by an operator only).
            event_types (list[str]): Event types it subscribes to (`*`: every type).
            middleware (list[ChannelViewMiddlewareItem]): Steps applied to each delivery's copy of the payload before it is
                sent:
                `{"type": "transform", "script"}` or `{"type": "halt", "if", "reason"}`.
            created_at (str):
            updated_at (str):
            signing_secret (str):
            rate_limit (None | str | Unset):
            disabled_at (None | str | Unset):
            disabled_reason (None | str | Unset):
            filter_ (ChannelViewFilterType0 | None | Unset): Which activities it wants, when it has a filter
                (`docs/channels/filters.md`).
            ordering (ChannelViewOrderingType0 | None | Unset): Ordered lanes, when the channel has them: `{"by":
                "conversation", "on_dead_letter"}`.
     """

    id: str
    tenant_id: str
    type_: str
    name: str
    config: ChannelViewConfig
    active: bool
    retry_policy: ChannelViewRetryPolicy
    circuit_breaker: Any
    auto_disable: Any
    managed: bool
    event_types: list[str]
    middleware: list[ChannelViewMiddlewareItem]
    created_at: str
    updated_at: str
    signing_secret: str
    rate_limit: None | str | Unset = UNSET
    disabled_at: None | str | Unset = UNSET
    disabled_reason: None | str | Unset = UNSET
    filter_: ChannelViewFilterType0 | None | Unset = UNSET
    ordering: ChannelViewOrderingType0 | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.channel_view_config import ChannelViewConfig # noqa: PLC0415
        from ..models.channel_view_filter_type_0 import ChannelViewFilterType0 # noqa: PLC0415
        from ..models.channel_view_middleware_item import ChannelViewMiddlewareItem # noqa: PLC0415
        from ..models.channel_view_ordering_type_0 import ChannelViewOrderingType0 # noqa: PLC0415
        from ..models.channel_view_retry_policy import ChannelViewRetryPolicy # noqa: PLC0415
        id = self.id

        tenant_id = self.tenant_id

        type_ = self.type_

        name = self.name

        config = self.config.to_dict()

        active = self.active

        retry_policy = self.retry_policy.to_dict()

        circuit_breaker = self.circuit_breaker

        auto_disable = self.auto_disable

        managed = self.managed

        event_types = self.event_types



        middleware = []
        for middleware_item_data in self.middleware:
            middleware_item = middleware_item_data.to_dict()
            middleware.append(middleware_item)



        created_at = self.created_at

        updated_at = self.updated_at

        signing_secret = self.signing_secret

        rate_limit: None | str | Unset
        if isinstance(self.rate_limit, Unset):
            rate_limit = UNSET
        else:
            rate_limit = self.rate_limit

        disabled_at: None | str | Unset
        if isinstance(self.disabled_at, Unset):
            disabled_at = UNSET
        else:
            disabled_at = self.disabled_at

        disabled_reason: None | str | Unset
        if isinstance(self.disabled_reason, Unset):
            disabled_reason = UNSET
        else:
            disabled_reason = self.disabled_reason

        filter_: dict[str, Any] | None | Unset
        if isinstance(self.filter_, Unset):
            filter_ = UNSET
        elif isinstance(self.filter_, ChannelViewFilterType0):
            filter_ = self.filter_.to_dict()
        else:
            filter_ = self.filter_

        ordering: dict[str, Any] | None | Unset
        if isinstance(self.ordering, Unset):
            ordering = UNSET
        elif isinstance(self.ordering, ChannelViewOrderingType0):
            ordering = self.ordering.to_dict()
        else:
            ordering = self.ordering


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "id": id,
            "tenant_id": tenant_id,
            "type": type_,
            "name": name,
            "config": config,
            "active": active,
            "retry_policy": retry_policy,
            "circuit_breaker": circuit_breaker,
            "auto_disable": auto_disable,
            "managed": managed,
            "event_types": event_types,
            "middleware": middleware,
            "created_at": created_at,
            "updated_at": updated_at,
            "signing_secret": signing_secret,
        })
        if rate_limit is not UNSET:
            field_dict["rate_limit"] = rate_limit
        if disabled_at is not UNSET:
            field_dict["disabled_at"] = disabled_at
        if disabled_reason is not UNSET:
            field_dict["disabled_reason"] = disabled_reason
        if filter_ is not UNSET:
            field_dict["filter"] = filter_
        if ordering is not UNSET:
            field_dict["ordering"] = ordering

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.channel_view_config import ChannelViewConfig # noqa: PLC0415
        from ..models.channel_view_filter_type_0 import ChannelViewFilterType0 # noqa: PLC0415
        from ..models.channel_view_middleware_item import ChannelViewMiddlewareItem # noqa: PLC0415
        from ..models.channel_view_ordering_type_0 import ChannelViewOrderingType0 # noqa: PLC0415
        from ..models.channel_view_retry_policy import ChannelViewRetryPolicy # noqa: PLC0415
        d = dict(src_dict)
        id = d.pop("id")

        tenant_id = d.pop("tenant_id")

        type_ = d.pop("type")

        name = d.pop("name")

        config = ChannelViewConfig.from_dict(d.pop("config"))




        active = d.pop("active")

        retry_policy = ChannelViewRetryPolicy.from_dict(d.pop("retry_policy"))




        circuit_breaker = d.pop("circuit_breaker")

        auto_disable = d.pop("auto_disable")

        managed = d.pop("managed")

        event_types = cast(list[str], d.pop("event_types"))


        middleware = []
        _middleware = d.pop("middleware")
        for middleware_item_data in (_middleware):
            middleware_item = ChannelViewMiddlewareItem.from_dict(middleware_item_data)



            middleware.append(middleware_item)


        created_at = d.pop("created_at")

        updated_at = d.pop("updated_at")

        signing_secret = d.pop("signing_secret")

        def _parse_rate_limit(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit", UNSET))


        def _parse_disabled_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        disabled_at = _parse_disabled_at(d.pop("disabled_at", UNSET))


        def _parse_disabled_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        disabled_reason = _parse_disabled_reason(d.pop("disabled_reason", UNSET))


        def _parse_filter_(data: object) -> ChannelViewFilterType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_0 = ChannelViewFilterType0.from_dict(data)



                return filter_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ChannelViewFilterType0 | None | Unset, data)

        filter_ = _parse_filter_(d.pop("filter", UNSET))


        def _parse_ordering(data: object) -> ChannelViewOrderingType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                ordering_type_0 = ChannelViewOrderingType0.from_dict(data)



                return ordering_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ChannelViewOrderingType0 | None | Unset, data)

        ordering = _parse_ordering(d.pop("ordering", UNSET))


        created_channel = cls(
            id=id,
            tenant_id=tenant_id,
            type_=type_,
            name=name,
            config=config,
            active=active,
            retry_policy=retry_policy,
            circuit_breaker=circuit_breaker,
            auto_disable=auto_disable,
            managed=managed,
            event_types=event_types,
            middleware=middleware,
            created_at=created_at,
            updated_at=updated_at,
            signing_secret=signing_secret,
            rate_limit=rate_limit,
            disabled_at=disabled_at,
            disabled_reason=disabled_reason,
            filter_=filter_,
            ordering=ordering,
        )


        created_channel.additional_properties = d
        return created_channel

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
