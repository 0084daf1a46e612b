"""The streaming processor's two lanes and the host's columnar inserts,
in-process (no Spark session): the event lane and its coalesced CTIs must
give the same output CHT and counts as the row lane and as the host fed one
element at a time; ``Host.process_inserts`` must equal ``process_many``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udm.host import (
    Cti,
    HoppingWindow,
    Host,
    Insert,
    InvalidElementError,
    Retract,
    TumblingWindow,
    UdmInvocationError,
    output_cht,
)
from udm.host.stream import Element
from udm.sdk import IncrementalAggregate

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from udm.host.plan import UdmCall  # noqa: E402
from udm.host.spark import hostprocessor as hp  # noqa: E402
from udm.host.spark import streaming as sm  # noqa: E402
from udm.host.spark import streamrows as sr  # noqa: E402


class Mean(IncrementalAggregate):
    """Invertible (the host's fast path) and picky: 13 is refused."""

    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        if value == 13.0:
            raise ValueError("13 is unlucky")
        return (state[0] + value, state[1] + 1)

    def remove(self, state: tuple[float, int], value: float) -> tuple[float, int]:
        return (state[0] - value, state[1] - 1)

    def result(self, state: tuple[float, int]) -> float | None:
        return state[0] / state[1] if state[1] else None


# ------------------------------------------------------- in-process handle


class _State:
    def __init__(self) -> None:
        self.value: Any = None

    def exists(self) -> bool:
        return self.value is not None

    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value


class _Handle:
    def __init__(self) -> None:
        self.state = _State()

    def getValueState(self, name: str, schema: Any) -> _State:
        return self.state

    def registerTimer(self, t: int) -> None:
        pass

    def deleteTimer(self, t: int) -> None:
        pass


class _Timer:
    def getCurrentWatermarkInMs(self) -> int:
        return 0


COLUMNS = ["kind", "seq", "id", sr.S_COL, sr.E_COL, sr.NE_COL, "k", "mean", *sr.COUNT_COLUMNS]


def _processor(window: Any, advance: sm.AdvanceTime, events: bool) -> hp.HostProcessor:
    call = UdmCall("mean", Mean(), "v", None)
    options = {
        "input_clipping": "none",
        "output_policy": None,
        "consistency": "speculative",
        "cti_policy": advance.policy,
    }
    p = hp.HostProcessor(
        window, call, options, ["k"], ["v"], "point", advance, "raise", COLUMNS, None, False, events
    )
    p.init(_Handle())  # type: ignore[arg-type]
    return p


def _micro_batch(rows: list[tuple[str, int, float, int]], events: bool) -> Iterator[Any]:
    """Rows (key, start, value, seq) as the packed frames Spark would deliver
    (an event stream ships no kind, id or new end)."""
    n = len(rows)
    table = pa.table(
        {
            sr.GROUP_COL: pa.array([0] * n, pa.int32()),
            "k": [r[0] for r in rows],
            sr.KIND_COL: ["insert"] * n,
            sr.ID_COL: pa.array([r[3] for r in rows], pa.int64()),  # elements need ids
            sr.S_COL: pa.array([r[1] for r in rows], pa.int64()),
            sr.E_COL: pa.array([r[1] + 1 for r in rows], pa.int64()),
            sr.NE_COL: pa.nulls(n, pa.int64()),
            sr.SEQ_COL: pa.array([r[3] for r in rows], pa.int64()),
            sr.CTI_COL: pa.nulls(n, pa.timestamp("us", tz="UTC")),
            "v": pa.array([r[2] for r in rows], pa.float64()),
        }
    )
    if events:
        table = table.drop_columns([sr.KIND_COL, sr.ID_COL, sr.NE_COL])
    packed = pa.Table.from_batches(list(sr.pack_rows(iter(table.to_batches(max_chunksize=7)))))
    return iter([packed.to_pandas()])


def _run(p: hp.HostProcessor, batches: list[list[tuple[str, int, float, int]]]) -> list[dict]:
    out: list[dict[str, Any]] = []
    for rows in batches:
        if not rows:
            continue  # Spark calls no handler for a bucket without rows
        for frame in p.handleInputRows((0,), _micro_batch(rows, p.events), _Timer()):  # type: ignore[arg-type]
            out += frame.astype(object).where(frame.notna(), None).to_dict("records")
    return out


def _by_key(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """Per key: the output CHT and the late/invalid counts."""
    elements: dict[str, list[Element]] = {}
    counts: dict[str, list[int]] = {}
    for r in rows:
        k = r["k"]
        if r["kind"] == "insert":
            elements.setdefault(k, []).append(Insert(r["id"], r[sr.S_COL], r[sr.E_COL], r["mean"]))
        elif r["kind"] == "retract":
            elements.setdefault(k, []).append(
                Retract(r["id"], r[sr.S_COL], r[sr.E_COL], r[sr.NE_COL])
            )
        elif r["kind"] == "stats":
            c = counts.setdefault(k, [0, 0, 0])
            for i, name in enumerate(sr.COUNT_COLUMNS):
                c[i] += int(r[name] or 0)
    return {k: output_cht(v) for k, v in elements.items()}, counts


def _one_by_one(window: Any, advance: sm.AdvanceTime, batches: list[list[Any]]) -> Any:
    """The semantics the lanes must keep: per key, every row in seq order
    as an Insert, each generated CTI right after the event that made it."""
    p = _processor(window, advance, events=False)
    hosts: dict[str, tuple[Host, dict[str, Any]]] = {}
    outs: dict[str, list[Element]] = {}
    counts: dict[str, list[int]] = {}
    for rows in batches:
        for k, s, v, _ in sorted(rows, key=lambda r: r[3]):
            if k not in hosts:
                hosts[k] = p._host(None)
            host, meta = hosts[k]
            before = host.stats.dropped, host.stats.adjusted
            elements: list[Element] = [Insert(meta["n"], s, s + 1, {"v": v})]
            meta["n"] += 1
            cti = p._generate(meta, s)
            if cti is not None:
                elements.append(Cti(cti))
            for el in elements:
                outs.setdefault(k, []).extend(host.process(el))
            c = counts.setdefault(k, [0, 0, 0])
            c[0] += host.stats.dropped - before[0]
            c[1] += host.stats.adjusted - before[1]
    chts = {k: output_cht([e for e in v if not isinstance(e, Cti)]) for k, v in outs.items()}
    return {k: v for k, v in chts.items() if len(v)}, {k: c for k, c in counts.items() if any(c)}


SECOND = 1_000_000


@st.composite
def _batches(draw: st.DrawFn) -> list[list[tuple[str, int, float, int]]]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    jitter = draw(st.sampled_from([0, 3, 20]))  # seconds of disorder: late events
    batches, seq, t = [], 0, 0
    for _ in range(draw(st.integers(1, 4))):
        rows = []
        for _ in range(draw(st.integers(0, 40))):
            t += rng.randint(0, 2)
            start = max(0, t - rng.randint(0, jitter)) * SECOND
            rows.append((rng.choice("ab"), start, float(rng.randint(1, 9)), seq))
            seq += 1
        rng.shuffle(rows)  # Spark delivers in any order; seq restores it
        batches.append(rows)
    return batches


ADVANCE = st.builds(
    sm.AdvanceTime,
    every_events=st.sampled_from([None, 1, 3]),
    every=st.sampled_from([5 * SECOND, 10 * SECOND]),
    delay=st.sampled_from([0, 2 * SECOND]),
    policy=st.sampled_from(["drop", "adjust"]),
) | st.builds(
    sm.AdvanceTime,
    every_events=st.sampled_from([1, 4]),
    delay=st.sampled_from([0, 2 * SECOND]),
    policy=st.sampled_from(["drop", "adjust"]),
)

WINDOWS = st.sampled_from([TumblingWindow(10 * SECOND), HoppingWindow(10 * SECOND, 5 * SECOND)])


@settings(max_examples=60, deadline=None)
@given(batches=_batches(), advance=ADVANCE, window=WINDOWS)
def test_event_lane_and_row_lane_keep_one_by_one_semantics(
    batches: list[list[Any]], advance: sm.AdvanceTime, window: Any
) -> None:
    expected = _one_by_one(window, advance, batches)
    lanes = [_run(_processor(window, advance, events), batches) for events in (True, False)]
    for rows in lanes:
        chts, counts = _by_key(rows)
        assert ({k: v for k, v in chts.items() if len(v)}, counts) == expected
    # one rule for where generated CTIs go: both lanes emit the same rows
    assert lanes[0] == lanes[1]


@settings(max_examples=200, deadline=None)
@given(
    starts=st.lists(st.integers(0, 60), max_size=30),
    advance=ADVANCE,
    count=st.integers(0, 5),
    max_start=st.none() | st.integers(0, 60),
    gen=st.none() | st.integers(0, 60),
)
def test_generated_ctis_equal_the_per_event_rule(
    starts: list[int], advance: sm.AdvanceTime, count: int, max_start: int | None, gen: int | None
) -> None:
    import numpy as np

    p = _processor(TumblingWindow(10), advance, events=True)
    meta = {"n": 0, "count": count, "max_start": max_start, "gen": gen}
    one = dict(meta)
    expected = []
    for i, s in enumerate(starts):
        c = p._generate(one, s)
        if c is not None:
            expected.append((i, c))
    assert p.ctis is not None
    assert p.ctis.batch(meta, np.array(starts, dtype=np.int64)) == expected
    assert meta == one


# --------------------------------------------------- host: columnar inserts


def _streams(seed: int) -> list[Element]:
    rng = random.Random(seed)
    out: list[Element] = []
    t = 0
    for i in range(120):
        t += rng.randint(0, 3)
        s = max(0, t - rng.randint(0, 8))
        out.append(Insert(i, s, s + rng.choice([1, 1, 1, 4, 25]), rng.randint(1, 9) * 1.0))
        if rng.random() < 0.1:
            out.append(Cti(max(0, t - 2)))
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("window", [TumblingWindow(10), HoppingWindow(10, 5)])
@pytest.mark.parametrize("policy", ["drop", "adjust"])
@pytest.mark.parametrize("retractions", [True, False])
def test_process_inserts_equals_process_many(
    seed: int, window: Any, policy: str, retractions: bool
) -> None:
    stream = _streams(seed)
    one = Host(window, Mean, cti_policy=policy)
    many = Host(window, Mean, cti_policy=policy, retractions=retractions)
    expected = one.process_many(stream)
    got: list[Element] = []
    run: list[Insert] = []
    for el in [*stream, None]:
        if isinstance(el, Insert):
            run.append(el)
            continue
        if run:
            got += many.process_inserts(
                [e.id for e in run], [e.start for e in run], [e.end for e in run],
                [e.payload for e in run],
            )  # fmt: skip
            run = []
        if el is not None:
            got += many.process(el)
    assert got == expected
    assert (many.stats.dropped, many.stats.adjusted) == (one.stats.dropped, one.stats.adjusted)


def test_process_inserts_names_the_event_the_udm_failed_on() -> None:
    host = Host(TumblingWindow(10), Mean)
    host.process_inserts([0, 1], [1, 2], [2, 3], [1.0, 2.0])
    with pytest.raises(UdmInvocationError) as info:
        host.process_inserts([2, 3], [4, 5], [5, 6], [13.0, 1.0])
    assert info.value.element == Insert(2, 4, 5, 13.0)
    assert "13 is unlucky" in str(info.value)
    assert info.value.position == 0  # type: ignore[attr-defined]
    # nothing of the failing event stayed: the window holds the first two
    out = host.process(Cti(10))
    assert [(e.start, e.end, e.payload) for e in out if isinstance(e, Insert)] == [(0, 10, 1.5)]


def test_a_host_without_retractions_refuses_one() -> None:
    host = Host(TumblingWindow(10), Mean, retractions=False)
    host.process(Insert(0, 1, 2, 1.0))
    with pytest.raises(InvalidElementError, match="retractions=False"):
        host.process(Retract(0, 1, 2, 1))
    # and nothing was lost: the event still counts
    out = host.process(Cti(10))
    assert [(e.start, e.end, e.payload) for e in out if isinstance(e, Insert)] == [(0, 10, 1.0)]


def _element_processor(on_invalid: str) -> hp.HostProcessor:
    call = UdmCall("mean", Mean(), "v", None)
    options = {"input_clipping": "none", "output_policy": None, "consistency": "speculative"}
    p = hp.HostProcessor(
        TumblingWindow(10), call, options, ["k"], ["k", "v"], "point", None, on_invalid,
        COLUMNS, None, True,
    )  # fmt: skip
    p.init(_Handle())  # type: ignore[arg-type]
    return p


def _elements_batch(rows: list[tuple[str, Any, Any, Any, Any, Any]]) -> Iterator[Any]:
    """Element rows (kind, id, start, end, new_end, key) of one micro-batch."""
    n = len(rows)
    table = pa.table(
        {
            sr.GROUP_COL: pa.array([0] * n, pa.int32()),
            "k": [r[5] for r in rows],
            sr.KIND_COL: [r[0] for r in rows],
            sr.ID_COL: pa.array([r[1] for r in rows], pa.int64()),
            sr.S_COL: pa.array([r[2] for r in rows], pa.int64()),
            sr.E_COL: pa.array([r[3] for r in rows], pa.int64()),
            sr.NE_COL: pa.array([r[4] for r in rows], pa.int64()),
            sr.SEQ_COL: pa.array(range(n), pa.int64()),
            sr.CTI_COL: pa.nulls(n, pa.timestamp("us", tz="UTC")),
            "v": pa.array([1.0] * n, pa.float64()),
        }
    )
    packed = pa.Table.from_batches(list(sr.pack_rows(iter(table.to_batches()))))
    return iter([packed.to_pandas()])


BAD_ROWS = {
    "broadcast CTI without a time": ("cti", None, None, None, None, None),
    "keyed CTI without a time": ("cti", None, None, None, None, "a"),
    "retraction without new_end": ("retract", 0, 1, 2, None, "a"),
}


@pytest.mark.parametrize("bad", list(BAD_ROWS), ids=list(BAD_ROWS))
@pytest.mark.parametrize("on_invalid", ["raise", "drop"])
def test_malformed_element_rows_are_raised_or_counted(bad: str, on_invalid: str) -> None:
    # a broadcast CTI without a time was ignored, a keyed one raised even
    # under drop, and a retraction without new_end taken as a full one
    rows = [("insert", 0, 1, 2, None, "a"), BAD_ROWS[bad]]
    p = _element_processor(on_invalid)
    if on_invalid == "raise":
        with pytest.raises(ValueError, match=r"null (start|new_end).*on_invalid='drop'") as info:
            list(p.handleInputRows((0,), _elements_batch(rows), _Timer()))  # type: ignore[arg-type]
        assert "'start':" in str(info.value)  # the user's names, not internal ones
        return
    out: list[dict[str, Any]] = []
    for frame in p.handleInputRows((0,), _elements_batch(rows), _Timer()):  # type: ignore[arg-type]
        out += frame.astype(object).where(frame.notna(), None).to_dict("records")
    assert sum(int(r["invalid_dropped"] or 0) for r in out if r["kind"] == "stats") == 1


def test_a_retraction_without_its_keys_is_explained() -> None:
    # replay finds the key of a keyless retraction; streaming cannot
    rows = [("insert", 0, 1, 2, None, "a"), ("retract", 0, 1, 2, 1, None)]
    p = _element_processor("raise")
    with pytest.raises(InvalidElementError, match="must carry its event's key columns"):
        list(p.handleInputRows((0,), _elements_batch(rows), _Timer()))  # type: ignore[arg-type]


def test_an_element_insert_without_an_id_is_an_invalid_row() -> None:
    """It got an id of its own (first 0, 1, ..., which collided with a
    user's id 0; then one no user id could equal), where replay and the
    host refuse it: no retraction can ever name it."""
    rows = [
        ("insert", None, 1, 2, None, "a"),
        ("insert", 0, 3, 4, None, "a"),
        ("cti", None, 20, None, None, "a"),
    ]
    with pytest.raises(ValueError) as err:
        list(_element_processor("raise").handleInputRows((0,), _elements_batch(rows), _Timer()))  # type: ignore[arg-type]
    assert "null id (every insert of an element stream needs an id" in str(err.value)
    assert "'kind': 'insert', 'id': None, 'start': 1" in str(err.value)
    p = _element_processor("drop")
    out: list[dict[str, Any]] = []
    for frame in p.handleInputRows((0,), _elements_batch(rows), _Timer()):  # type: ignore[arg-type]
        out += frame.astype(object).where(frame.notna(), None).to_dict("records")
    inserts = [(r[sr.S_COL], r[sr.E_COL], r["mean"]) for r in out if r["kind"] == "insert"]
    assert inserts == [(0, 10, 1.0)]  # the event with an id
    assert [r["invalid_dropped"] for r in out if r["kind"] == "stats"] == [1]
