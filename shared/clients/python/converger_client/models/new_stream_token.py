from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="NewStreamToken")



@_attrs_define
class NewStreamToken:
    """ What a live stream token is asked for with (the body is optional).

        Attributes:
            topics (list[str] | None | Unset): The only topics (`conversation:<id>`, `channel_health`) a connection made
                with the
                token may follow, 1 to 20 of them; without it, any of the tenant's.
     """

    topics: list[str] | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        topics: list[str] | None | Unset
        if isinstance(self.topics, Unset):
            topics = UNSET
        elif isinstance(self.topics, list):
            topics = self.topics


        else:
            topics = self.topics


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if topics is not UNSET:
            field_dict["topics"] = topics

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        def _parse_topics(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                topics_type_0 = cast(list[str], data)

                return topics_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        topics = _parse_topics(d.pop("topics", UNSET))


        new_stream_token = cls(
            topics=topics,
        )

        return new_stream_token

