from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.shard_grant_view import ShardGrantView





T = TypeVar("T", bound="TenantView")



@_attrs_define
class TenantView:
    """ A tenant, as operators see it.

        Attributes:
            id (str):
            name (str):
            tier (str): `high`, `default` or `bulk`: the delivery queue its deliveries run on. Example: default.
            created_at (str):
            api_rate_limit (str): Each API key's rate limit: the operator's override, else the tier's default.
            api_rate_limit_overridden (bool): Whether `api_rate_limit` is an override.
            delivery_shards (int): How many partitions its delivery listings are spread over (the tier's default unless
                an operator raised it; see docs/scaling.md).
            email_senders (list[str]): The SES identities its email channels may send from (set by an operator).
            alert_webhook_url (None | str | Unset):
            alert_channel_id (None | str | Unset):
            listing_shards_granted (None | ShardGrantView | Unset):
            ses_tenant (None | str | Unset): The SES tenant its email is sent on behalf of (set by an operator), if any.
     """

    id: str
    name: str
    tier: str
    created_at: str
    api_rate_limit: str
    api_rate_limit_overridden: bool
    delivery_shards: int
    email_senders: list[str]
    alert_webhook_url: None | str | Unset = UNSET
    alert_channel_id: None | str | Unset = UNSET
    listing_shards_granted: None | ShardGrantView | Unset = UNSET
    ses_tenant: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.shard_grant_view import ShardGrantView # noqa: PLC0415
        id = self.id

        name = self.name

        tier = self.tier

        created_at = self.created_at

        api_rate_limit = self.api_rate_limit

        api_rate_limit_overridden = self.api_rate_limit_overridden

        delivery_shards = self.delivery_shards

        email_senders = self.email_senders



        alert_webhook_url: None | str | Unset
        if isinstance(self.alert_webhook_url, Unset):
            alert_webhook_url = UNSET
        else:
            alert_webhook_url = self.alert_webhook_url

        alert_channel_id: None | str | Unset
        if isinstance(self.alert_channel_id, Unset):
            alert_channel_id = UNSET
        else:
            alert_channel_id = self.alert_channel_id

        listing_shards_granted: dict[str, Any] | None | Unset
        if isinstance(self.listing_shards_granted, Unset):
            listing_shards_granted = UNSET
        elif isinstance(self.listing_shards_granted, ShardGrantView):
            listing_shards_granted = self.listing_shards_granted.to_dict()
        else:
            listing_shards_granted = self.listing_shards_granted

        ses_tenant: None | str | Unset
        if isinstance(self.ses_tenant, Unset):
            ses_tenant = UNSET
        else:
            ses_tenant = self.ses_tenant


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "id": id,
            "name": name,
            "tier": tier,
            "created_at": created_at,
            "api_rate_limit": api_rate_limit,
            "api_rate_limit_overridden": api_rate_limit_overridden,
            "delivery_shards": delivery_shards,
            "email_senders": email_senders,
        })
        if alert_webhook_url is not UNSET:
            field_dict["alert_webhook_url"] = alert_webhook_url
        if alert_channel_id is not UNSET:
            field_dict["alert_channel_id"] = alert_channel_id
        if listing_shards_granted is not UNSET:
            field_dict["listing_shards_granted"] = listing_shards_granted
        if ses_tenant is not UNSET:
            field_dict["ses_tenant"] = ses_tenant

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.shard_grant_view import ShardGrantView # noqa: PLC0415
        d = dict(src_dict)
        id = d.pop("id")

        name = d.pop("name")

        tier = d.pop("tier")

        created_at = d.pop("created_at")

        api_rate_limit = d.pop("api_rate_limit")

        api_rate_limit_overridden = d.pop("api_rate_limit_overridden")

        delivery_shards = d.pop("delivery_shards")

        email_senders = cast(list[str], d.pop("email_senders"))


        def _parse_alert_webhook_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        alert_webhook_url = _parse_alert_webhook_url(d.pop("alert_webhook_url", UNSET))


        def _parse_alert_channel_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        alert_channel_id = _parse_alert_channel_id(d.pop("alert_channel_id", UNSET))


        def _parse_listing_shards_granted(data: object) -> None | ShardGrantView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                listing_shards_granted_type_1 = ShardGrantView.from_dict(data)



                return listing_shards_granted_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ShardGrantView | Unset, data)

        listing_shards_granted = _parse_listing_shards_granted(d.pop("listing_shards_granted", UNSET))


        def _parse_ses_tenant(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        ses_tenant = _parse_ses_tenant(d.pop("ses_tenant", UNSET))


        tenant_view = cls(
            id=id,
            name=name,
            tier=tier,
            created_at=created_at,
            api_rate_limit=api_rate_limit,
            api_rate_limit_overridden=api_rate_limit_overridden,
            delivery_shards=delivery_shards,
            email_senders=email_senders,
            alert_webhook_url=alert_webhook_url,
            alert_channel_id=alert_channel_id,
            listing_shards_granted=listing_shards_granted,
            ses_tenant=ses_tenant,
        )


        tenant_view.additional_properties = d
        return tenant_view

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
