from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.aws_identity_view_send_actions import AwsIdentityViewSendActions





T = TypeVar("T", bound="AwsIdentityView")



@_attrs_define
class AwsIdentityView:
    """ What a tenant's AWS account needs so that the platform can deliver into it
    (`docs/channels/aws.md`): a role that trusts `account_id` with `external_id`.

        Attributes:
            account_id (str): The platform's AWS account: the principal the role's trust policy names.
            external_id (str): The tenant's external id: the trust policy's `sts:ExternalId` condition.
            send_actions (AwsIdentityViewSendActions): The one action each AWS channel type needs on its target.
            role_template (str): A CloudFormation template (YAML) that creates such a role for one target.
     """

    account_id: str
    external_id: str
    send_actions: AwsIdentityViewSendActions
    role_template: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.aws_identity_view_send_actions import AwsIdentityViewSendActions # noqa: PLC0415
        account_id = self.account_id

        external_id = self.external_id

        send_actions = self.send_actions.to_dict()

        role_template = self.role_template


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "account_id": account_id,
            "external_id": external_id,
            "send_actions": send_actions,
            "role_template": role_template,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.aws_identity_view_send_actions import AwsIdentityViewSendActions # noqa: PLC0415
        d = dict(src_dict)
        account_id = d.pop("account_id")

        external_id = d.pop("external_id")

        send_actions = AwsIdentityViewSendActions.from_dict(d.pop("send_actions"))




        role_template = d.pop("role_template")

        aws_identity_view = cls(
            account_id=account_id,
            external_id=external_id,
            send_actions=send_actions,
            role_template=role_template,
        )


        aws_identity_view.additional_properties = d
        return aws_identity_view

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
