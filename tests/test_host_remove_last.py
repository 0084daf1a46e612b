"""A retraction that takes a grid window's last event out calls ``remove`` on
both of the host's paths.

docs/writing-udms.md: a ``remove`` that raises fails the retraction the host is
applying. The grid (fast) path always called it; the general path
(``fast_path=False``) used to drop the emptied window's state without the call,
so the same stream was refused on one path and accepted on the other.
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_support import Sum

from udm.host import (
    Cti,
    Element,
    HoppingWindow,
    Host,
    Insert,
    Retract,
    TumblingWindow,
    UdmInvocationError,
    point,
)
from udm.host.windows import WindowSpec
from udm.sdk import TimeSensitiveIncrementalAggregate
from udm.sdk.events import IntervalEvent, WindowDescriptor


class CountedSum(Sum):
    """A correct invertible sum that counts its ``remove`` calls."""

    removes = 0

    def remove(self, state: int, payload: int) -> int:
        CountedSum.removes += 1
        return super().remove(state, payload)


class BrokenRemove(CountedSum):
    def remove(self, state: int, payload: int) -> int:
        raise RuntimeError("remove is broken")


class BrokenTimedRemove(TimeSensitiveIncrementalAggregate):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, event: IntervalEvent[Any], window: WindowDescriptor) -> int:
        return state + int(event.payload)

    def remove(self, state: int, event: IntervalEvent[Any], window: WindowDescriptor) -> int:
        raise RuntimeError("remove is broken")

    def result(self, state: int, window: WindowDescriptor) -> int:
        return state


WINDOWS: list[WindowSpec] = [TumblingWindow(10), HoppingWindow(10, 5)]
PATHS = [True, False]


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@pytest.mark.parametrize("fast_path", PATHS)
@pytest.mark.parametrize(
    "retraction",
    [Retract("a", 1, 5, 1), Retract("a", 1, 15, 5)],
    ids=["full", "shrinks-out-of-a-later-window"],
)
def test_a_raising_remove_fails_the_retraction_on_both_paths(
    window: WindowSpec, fast_path: bool, retraction: Retract
) -> None:
    host = Host(window, BrokenRemove, fast_path=fast_path)
    host.process_many([Insert("a", 1, retraction.old_end, 1), point("b", 30, 1)])
    with pytest.raises(UdmInvocationError, match="remove is broken"):
        host.process(retraction)
    # the failed retraction changed nothing: the stream goes on as if it never came
    twin = Host(window, BrokenRemove, fast_path=fast_path)
    twin.process_many([Insert("a", 1, retraction.old_end, 1), point("b", 30, 1)])
    assert host.process_many([point("c", 31, 2), Cti(100)]) == twin.process_many(
        [point("c", 31, 2), Cti(100)]
    )


def test_a_time_sensitive_remove_is_called_on_the_general_path() -> None:
    host = Host(TumblingWindow(10), BrokenTimedRemove, fast_path=False)
    host.process_many([Insert("a", 1, 5, 1), point("b", 12, 1)])
    with pytest.raises(UdmInvocationError, match=r"window \[0, 10\)"):
        host.process(Retract("a", 1, 5, 1))


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
def test_both_paths_call_remove_as_often_and_agree(window: WindowSpec) -> None:
    stream: list[Element] = [
        Insert("a", 1, 5, 1),
        Insert("b", 3, 14, 2),
        point("c", 22, 4),
        Retract("a", 1, 5, 1),
        Retract("b", 3, 14, 4),
        Cti(40),
    ]
    counts, outputs = [], []
    for fast_path in PATHS:
        CountedSum.removes = 0
        outputs.append(Host(window, CountedSum, fast_path=fast_path).process_many(stream))
        counts.append(CountedSum.removes)
    assert outputs[0] == outputs[1]
    # tumbling: a out of [0,10); b out of [10,20) (its shrink keeps [0,10)).
    # hopping (10, 5): a out of [-5,5) and [0,10); b out of [5,15) and [10,20)
    assert counts == ([2, 2] if isinstance(window, TumblingWindow) else [4, 4])
