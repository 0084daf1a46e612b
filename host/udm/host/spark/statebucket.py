"""The one state value and one event-time timer of a bucket of keys.

Both streaming processors (:mod:`udm.host.spark.streaming`, one host per
key, and :mod:`udm.host.spark.graphstate`, one operator graph per key)
hash keys into buckets because the state API costs a round trip to the JVM
per call: a bucket keeps its keys' states pickled together in one value
and at most one timer. This module reads and writes that value
(:class:`BucketState`) and holds what the two processors' Spark handlers
share (:class:`BucketProcessor`).
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

__all__ = ["BucketProcessor", "BucketState"]


class BucketState:
    """A bucket's pickled state value (``name`` in the state store) and its
    event-time timer, for a query hashing keys into ``buckets`` buckets."""

    def __init__(self, handle: StatefulProcessorHandle, name: str, buckets: int) -> None:
        self.handle = handle
        self.buckets = buckets
        schema = T.StructType([T.StructField("blob", T.BinaryType(), True)])
        self.value = handle.getValueState(name, schema)

    def load(self, empty: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The bucket as saved, or ``empty()`` for a new one. Refuses a
        bucket written with another number of buckets: keys hash to other
        buckets now, and their states would be lost without a word."""
        saved = self.value.get() if self.value.exists() else None
        if saved is None or saved[0] is None:
            return empty()
        bucket: dict[str, Any] = pickle.loads(saved[0])
        written = bucket.setdefault("buckets", self.buckets)
        if written != self.buckets:
            raise ValueError(
                f"this checkpoint's state was written with state_buckets={written}, but the "
                f"query now has state_buckets={self.buckets}; restart with "
                f"state_buckets={written}, or use a new checkpoint"
            )
        return bucket

    def save(self, bucket: dict[str, Any], timer: int | None = None, *, timed: bool) -> None:
        """Store the bucket; with ``timed``, move its one timer to ``timer``
        (None: no timer), remembered in ``bucket["timer"]``."""
        if timed and bucket["timer"] != timer:
            if bucket["timer"] is not None:
                self.handle.deleteTimer(bucket["timer"])
            if timer is not None:
                self.handle.registerTimer(timer)
            bucket["timer"] = timer
        self.value.update((pickle.dumps(bucket, pickle.HIGHEST_PROTOCOL),))


class BucketProcessor(StatefulProcessor):
    """A ``transformWithStateInPandas`` processor serving a bucket of keys,
    with one :class:`BucketState`: the Spark handlers both streaming
    processors share.

    A subclass says what a micro-batch's rows do (:meth:`batch_rows`) and
    what a fired timer does (:meth:`timer_rows`), each returning changelog
    rows; this class runs them (a micro-batch with the garbage collector
    paused: many short-lived objects and no cycles, as in the host's
    loops), clears a fired timer, and yields the rows as one pandas
    DataFrame of ``columns``.
    """

    #: the name of the bucket's value in Spark's state store
    state_name: ClassVar[str]
    columns: list[str]
    buckets: int

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Spark's start of a partition's processing: open the bucket state."""
        self.handle = handle
        self.state = BucketState(handle, self.state_name, self.buckets)

    def handleInputRows(
        self, key: Any, rows: Iterator[Any], timerValues: TimerValues
    ) -> Iterator[Any]:
        """Spark's call for a bucket's rows of a micro-batch."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            yield from self._dataframe(self.batch_rows(rows, timerValues))
        finally:
            if collecting:
                gc.enable()

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: Any
    ) -> Iterator[Any]:
        """Spark's call when the bucket's timer fires: the watermark passed
        it, so keys without rows in this micro-batch may have output due."""
        bucket = self.load_bucket()
        bucket["timer"] = None  # a fired timer is gone
        out = self.timer_rows(bucket, timerValues.getCurrentWatermarkInMs() * 1000)
        self.save_bucket(bucket)
        yield from self._dataframe(out)

    def close(self) -> None:
        """Spark's end of a partition's processing: nothing is held open."""

    def load_bucket(self) -> dict[str, Any]:
        """The bucket's state as saved (a new one for a new bucket)."""
        raise NotImplementedError

    def save_bucket(self, bucket: dict[str, Any]) -> None:
        """Store the bucket's state and move its timer to where it is next needed."""
        raise NotImplementedError

    def batch_rows(self, rows: Iterator[Any], timerValues: TimerValues) -> list[dict[str, Any]]:
        """The changelog rows of a micro-batch's ``rows`` for this bucket
        (state loaded and saved by the subclass)."""
        raise NotImplementedError

    def timer_rows(self, bucket: dict[str, Any], wm: int) -> list[dict[str, Any]]:
        """The changelog rows due when the watermark reaches ``wm`` ticks."""
        raise NotImplementedError

    def _dataframe(self, out: list[dict[str, Any]]) -> Iterator[Any]:
        """``out`` as one DataFrame of :attr:`columns` (nothing when empty)."""
        if out:
            import pandas as pd

            yield pd.DataFrame(out, columns=self.columns, dtype=object)
