from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="ReleaseLane")



@_attrs_define
class ReleaseLane:
    """ 
        Attributes:
            conversation_id (str): The conversation whose lane a dead letter holds.
     """

    conversation_id: str





    def to_dict(self) -> dict[str, Any]:
        conversation_id = self.conversation_id


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "conversation_id": conversation_id,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        conversation_id = d.pop("conversation_id")

        release_lane = cls(
            conversation_id=conversation_id,
        )

        return release_lane

