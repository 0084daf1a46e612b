"""The one state value and one event-time timer of a bucket of keys.

Both streaming processors (:mod:`udm.host.spark.streaming`, one host per
key, and :mod:`udm.host.spark.graphstate`, one operator graph per key)
hash keys into buckets because the state API costs a round trip to the JVM
per call: a bucket keeps its keys' states pickled together in one value
and at most one timer. This module reads and writes that value.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle

__all__ = ["BucketState"]


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
