"""Restoring a Host from bytes that are no host snapshot: a udm error
saying so, not the unpickler's own (black-box report bb2, D6)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from engine_support import Sum

from udm.host import Host
from udm.host.windows import HoppingWindow, TumblingWindow


@pytest.mark.parametrize(
    ("blob", "cause"),
    [
        (b"garbage", "UnpicklingError"),
        (b"", "EOFError"),
        ("a str", "TypeError"),
    ],
)
def test_restoring_bytes_that_are_no_snapshot_says_so(blob: Any, cause: str) -> None:
    """``restore(b"garbage")`` raised a bare UnpicklingError (EOFError for
    ``b""``) instead of saying the bytes are not a snapshot."""
    with pytest.raises(ValueError, match=f"^not a udm host snapshot: .*\\({cause}: ") as err:
        Host(TumblingWindow(5), Sum).restore(blob)
    assert "pass the bytes a snapshot() returned" in str(err.value)
    assert not isinstance(err.value, pickle.UnpicklingError)


def test_snapshots_of_other_queries_keep_their_messages() -> None:
    blob = Host(TumblingWindow(5), Sum).snapshot()
    with pytest.raises(ValueError, match="cannot be restored into a host running") as err:
        Host(TumblingWindow(6), Sum).restore(blob)
    assert "differ too" not in str(err.value)
    # every difference at once: the window and the options (the options were left out)
    with pytest.raises(ValueError, match="cannot be restored into a host running") as err:
        Host(HoppingWindow(10, 5), Sum, consistency="conservative").restore(blob)
    assert "its query options differ too (consistency: speculative in the snapshot" in str(
        err.value
    )
    with pytest.raises(ValueError, match=r"^not a udm host snapshot$"):
        Host(TumblingWindow(5), Sum).restore(pickle.dumps({"format": "other"}))
    Host(TumblingWindow(5), Sum).restore(blob)  # the same query resumes
