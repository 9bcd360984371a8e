from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="PatchTenant")



@_attrs_define
class PatchTenant:
    """ 
        Attributes:
            tier (None | str | Unset):
            alert_webhook_url (None | str | Unset): A URL sets the tenant's alert webhook; `null` removes it.
            api_rate_limit (None | str | Unset): Each of its API keys' rate limit (`"<n>/s"`, `/m`, `/h`), overriding the
                tier's;
                `null` goes back to the tier's.
            delivery_shards (int | None | Unset): How many partitions its delivery listings are spread over from now on (1
                to 256; only
                grows). Each takes a few hundred deliveries a second (see docs/scaling.md).
            email_senders (list[str] | None | Unset): The SES identities (addresses like `news@acme.com`, domains like
                `acme.com`) the
                tenant's email channels may send from, replacing those it has (`[]` removes them; at
                most 20). A domain covers its addresses, not its subdomains.
            ses_tenant (None | str | Unset): The SES tenant its email is sent on behalf of (`TenantName`; 1 to 64 letters,
                digits,
                `-`, `_`): SES then sends only from identities associated with that SES tenant and
                keeps its reputation apart. `null` sends as the account.
     """

    tier: None | str | Unset = UNSET
    alert_webhook_url: None | str | Unset = UNSET
    api_rate_limit: None | str | Unset = UNSET
    delivery_shards: int | None | Unset = UNSET
    email_senders: list[str] | None | Unset = UNSET
    ses_tenant: None | str | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        tier: None | str | Unset
        if isinstance(self.tier, Unset):
            tier = UNSET
        else:
            tier = self.tier

        alert_webhook_url: None | str | Unset
        if isinstance(self.alert_webhook_url, Unset):
            alert_webhook_url = UNSET
        else:
            alert_webhook_url = self.alert_webhook_url

        api_rate_limit: None | str | Unset
        if isinstance(self.api_rate_limit, Unset):
            api_rate_limit = UNSET
        else:
            api_rate_limit = self.api_rate_limit

        delivery_shards: int | None | Unset
        if isinstance(self.delivery_shards, Unset):
            delivery_shards = UNSET
        else:
            delivery_shards = self.delivery_shards

        email_senders: list[str] | None | Unset
        if isinstance(self.email_senders, Unset):
            email_senders = UNSET
        elif isinstance(self.email_senders, list):
            email_senders = self.email_senders


        else:
            email_senders = self.email_senders

        ses_tenant: None | str | Unset
        if isinstance(self.ses_tenant, Unset):
            ses_tenant = UNSET
        else:
            ses_tenant = self.ses_tenant


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if tier is not UNSET:
            field_dict["tier"] = tier
        if alert_webhook_url is not UNSET:
            field_dict["alert_webhook_url"] = alert_webhook_url
        if api_rate_limit is not UNSET:
            field_dict["api_rate_limit"] = api_rate_limit
        if delivery_shards is not UNSET:
            field_dict["delivery_shards"] = delivery_shards
        if email_senders is not UNSET:
            field_dict["email_senders"] = email_senders
        if ses_tenant is not UNSET:
            field_dict["ses_tenant"] = ses_tenant

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        def _parse_tier(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tier = _parse_tier(d.pop("tier", UNSET))


        def _parse_alert_webhook_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        alert_webhook_url = _parse_alert_webhook_url(d.pop("alert_webhook_url", UNSET))


        def _parse_api_rate_limit(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        api_rate_limit = _parse_api_rate_limit(d.pop("api_rate_limit", UNSET))


        def _parse_delivery_shards(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        delivery_shards = _parse_delivery_shards(d.pop("delivery_shards", UNSET))


        def _parse_email_senders(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                email_senders_type_0 = cast(list[str], data)

                return email_senders_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        email_senders = _parse_email_senders(d.pop("email_senders", UNSET))


        def _parse_ses_tenant(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        ses_tenant = _parse_ses_tenant(d.pop("ses_tenant", UNSET))


        patch_tenant = cls(
            tier=tier,
            alert_webhook_url=alert_webhook_url,
            api_rate_limit=api_rate_limit,
            delivery_shards=delivery_shards,
            email_senders=email_senders,
            ses_tenant=ses_tenant,
        )

        return patch_tenant

