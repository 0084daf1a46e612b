"""The rows a ``*.udm.yaml`` fixture writes: its input elements
(``insert``, ``retract``, ``cti`` items, told apart by their key) and its
expected output events, as strict pydantic models that check their times
(:mod:`udm.testing.schema` builds the fixture from them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Tag, field_validator, model_validator

from udm.host.time import INFINITY
from udm.testing.yamlread import Id, Time, checked_id, time_value

__all__ = [
    "CtiItem",
    "ExpectedEvent",
    "InsertItem",
    "Item",
    "RetractItem",
    "StrictModel",
    "item_kind",
]


class StrictModel(BaseModel):
    """The strict base of fixture models: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


# ------------------------------------------------------------ input elements


class InsertItem(StrictModel):
    """``{insert: id, start: t, end: t, payload: p}``; without ``end`` a point event."""

    insert: Id
    start: Time
    end: Time | None = None
    payload: Any = None

    check_id = field_validator("insert", mode="before")(checked_id)
    check_times = field_validator("start", "end", mode="before")(
        lambda v: None if v is None else time_value(v)
    )

    @model_validator(mode="after")
    def _lifetime(self) -> InsertItem:
        if self.start >= INFINITY:
            raise ValueError(
                f"insert {self.insert!r}: start must be a finite time (only an end, a new_end "
                "or a CTI may be inf)"
            )
        if self.end is not None and self.end <= self.start:
            raise ValueError(
                f"insert {self.insert!r}: end {self.end} must be after start {self.start} "
                "(omit end for a point event)"
            )
        return self


class RetractItem(StrictModel):
    """``{retract: id, new_end: t}``; ``start``/``old_end`` default to the
    event's current lifetime; ``new_end == start`` deletes it."""

    retract: Id
    new_end: Time
    start: Time | None = None
    old_end: Time | None = None

    check_id = field_validator("retract", mode="before")(checked_id)
    check_times = field_validator("new_end", "start", "old_end", mode="before")(
        lambda v: None if v is None else time_value(v)
    )


class CtiItem(StrictModel):
    """``{cti: t}``: no later element changes anything before ``t``."""

    cti: Time

    check_times = field_validator("cti", mode="before")(time_value)


def item_kind(*kinds: str) -> Callable[[Any], str | None]:
    """The discriminator of an input item: the first of ``kinds`` its
    mapping has as a key (query fixtures add ``external_cti``)."""

    def kind_of(value: Any) -> str | None:
        if isinstance(value, dict):
            for kind in kinds:
                if kind in value:
                    return kind
        return None

    return kind_of


Item = Annotated[
    Annotated[InsertItem, Tag("insert")]
    | Annotated[RetractItem, Tag("retract")]
    | Annotated[CtiItem, Tag("cti")],
    Discriminator(
        item_kind("insert", "retract", "cti"),
        custom_error_type="element_kind",
        custom_error_message="each input element needs one of the keys insert, retract or cti",
    ),
]


class ExpectedEvent(StrictModel):
    """One row of the expected output CHT (``key`` with group-and-apply)."""

    start: Time
    end: Time
    payload: Any = None
    key: Any = None

    check_times = field_validator("start", "end", mode="before")(time_value)

    @model_validator(mode="after")
    def _lifetime(self) -> ExpectedEvent:
        if self.start >= INFINITY:
            raise ValueError("start must be a finite time (only end may be inf)")
        if self.end <= self.start:
            raise ValueError(
                f"end {self.end} must be after start {self.start} "
                "(a point event's row ends at start + 1)"
            )
        return self
