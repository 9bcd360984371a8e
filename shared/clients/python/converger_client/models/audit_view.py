from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.actor_view import ActorView
  from ..models.audit_view_changes import AuditViewChanges





T = TypeVar("T", bound="AuditView")



@_attrs_define
class AuditView:
    """ One entry of the audit log.

        Attributes:
            id (str):
            tenant_id (str):
            actor (ActorView): Who did something.
            action (str): What was done (`retry`, `pause_deliveries`, `rotate_signing_secret`, ...).
            resource_type (str):
            resource_id (str):
            changes (AuditViewChanges):
            at (str):
     """

    id: str
    tenant_id: str
    actor: ActorView
    action: str
    resource_type: str
    resource_id: str
    changes: AuditViewChanges
    at: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.actor_view import ActorView # noqa: PLC0415
        from ..models.audit_view_changes import AuditViewChanges # noqa: PLC0415
        id = self.id

        tenant_id = self.tenant_id

        actor = self.actor.to_dict()

        action = self.action

        resource_type = self.resource_type

        resource_id = self.resource_id

        changes = self.changes.to_dict()

        at = self.at


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "id": id,
            "tenant_id": tenant_id,
            "actor": actor,
            "action": action,
            "resource_type": resource_type,
            "resource_id": resource_id,
            "changes": changes,
            "at": at,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.actor_view import ActorView # noqa: PLC0415
        from ..models.audit_view_changes import AuditViewChanges # noqa: PLC0415
        d = dict(src_dict)
        id = d.pop("id")

        tenant_id = d.pop("tenant_id")

        actor = ActorView.from_dict(d.pop("actor"))




        action = d.pop("action")

        resource_type = d.pop("resource_type")

        resource_id = d.pop("resource_id")

        changes = AuditViewChanges.from_dict(d.pop("changes"))




        at = d.pop("at")

        audit_view = cls(
            id=id,
            tenant_id=tenant_id,
            actor=actor,
            action=action,
            resource_type=resource_type,
            resource_id=resource_id,
            changes=changes,
            at=at,
        )


        audit_view.additional_properties = d
        return audit_view

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
