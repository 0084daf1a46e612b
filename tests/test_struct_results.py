"""UDM results that are not hashable (a dataclass, a numpy array, an object
with its own ``==``): the host compares a window's old and new outputs to
retract only what changed, and must do so by equality, as the reference
evaluator's CHTs do, on every window kind and path (a black-box acceptance
test found the host raising ``TypeError: unhashable type``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from udm.host import (
    Cht,
    CountByStartWindow,
    Cti,
    Host,
    Insert,
    Retract,
    SnapshotWindow,
    TumblingWindow,
    evaluate,
)
from udm.host.cht import derive_cht
from udm.host.query import Stream
from udm.sdk import aggregate, operator
from udm.sdk.payloads import freeze


@dataclass
class Pair:
    n: int
    total: int


class Bag:
    """Unhashable, equal by content (defines __eq__, so __hash__ is None)."""

    def __init__(self, items: list[int]) -> None:
        self.items = sorted(items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Bag) and self.items == other.items

    def __repr__(self) -> str:
        return f"Bag({self.items})"


@aggregate
def pair(values: list[int]) -> Pair:
    return Pair(len(values), sum(values))


@aggregate
def array(values: list[int]) -> Any:
    return np.array(sorted(values))


@aggregate
def bag(values: list[int]) -> Any:
    return Bag(values)


@operator
def pairs(values: list[int]) -> list[Pair]:
    return [Pair(1, v) for v in sorted(values)]


ROWS = [(1, 3, 1), (2, 4, 3), (7, 8, 2)]
WINDOWS = [SnapshotWindow(), CountByStartWindow(2), TumblingWindow(5)]


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: type(w).__name__)
def test_a_dataclass_result_gives_the_reference_cht_on_the_host_engine(window: Any) -> None:
    stream = Stream.from_cht(ROWS).window(window)
    expected = stream.aggregate(pair).to_cht(engine="reference")
    assert stream.aggregate(pair).to_cht(engine="host") == expected
    assert stream.apply(pairs).to_cht(engine="host") == stream.apply(pairs).to_cht(
        engine="reference"
    )


@pytest.mark.parametrize("udm", [pair, array, bag], ids=["dataclass", "numpy", "object"])
@pytest.mark.parametrize("fast_path", [True, False])
def test_unhashable_results_are_retracted_and_replaced_by_equality(
    udm: Any, fast_path: bool
) -> None:
    # a late event changes the window [0, 5): its first result is retracted
    # and the new one inserted; an event that leaves a result unchanged
    # (the second tumbling window's) changes nothing
    host = Host(TumblingWindow(5), udm, fast_path=fast_path)
    elements = [Insert("a", 1, 2, 1), Insert("b", 6, 7, 4), Insert("c", 2, 3, 5), Cti(10)]
    out = [o for el in elements for o in host.process(el)]
    cht, _ = derive_cht(out)
    expected = evaluate(Cht([(1, 2, 1), (6, 7, 4), (2, 3, 5)]), TumblingWindow(5), udm)
    assert len(expected) == 2
    assert Cht(cht) == expected
    assert any(isinstance(o, Retract) for o in out)  # the speculative first result


def test_freeze_compares_structured_values_by_content() -> None:
    assert freeze(Pair(1, 2)) == freeze(Pair(1, 2)) != freeze(Pair(1, 3))
    assert freeze(np.array([1, 2])) == freeze([1, 2]) == freeze(np.array([1.0, 2.0]))
    assert freeze(Bag([2, 1])) == freeze(Bag([1, 2])) != freeze(Bag([1]))
    assert len({freeze(Bag([2, 1])), freeze(Bag([1, 2]))}) == 1
