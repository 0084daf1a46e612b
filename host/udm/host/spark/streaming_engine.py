"""Structured Streaming as an engine: ``Stream.to_stream()``.

A query made of one window operation with one UDM runs the incremental host
per key (:func:`udm.host.spark.streaming.stream_changelog`); any other
query runs its operator graph per key
(:func:`udm.host.spark.graphstream.stream_query`).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from udm.host.plan import GroupNode, WindowOp, linear_chain, sources
from udm.host.spark.graphstream import stream_query
from udm.host.spark.streaming import stream_changelog
from udm.host.time import INFINITY

__all__ = ["StreamingEngine"]


class StreamingEngine:
    """Runs a :class:`~udm.host.query.Stream` on Structured Streaming."""

    name = "streaming"

    def collect(self, plan: Any) -> Any:
        """Refused: a streaming query runs continuously and has no final
        CHT to return (``to_cht(engine="streaming")``); the message says
        which engine gives the same result in batch."""
        raise ValueError(
            "engine='streaming' runs continuously and returns no CHT: for the same result in "
            "batch use to_cht(engine='spark') (or 'host', 'reference'); over spark.readStream "
            "sources call to_stream() and start it with udm.host.spark.streaming.start_stream "
            "(docs/streaming.md)"
        )

    def to_stream(self, stream: Any, **options: Any) -> DataFrame:
        """Run continuously: the output changelog of this query over its
        streaming DataFrame sources, as a streaming DataFrame. Start it with
        :func:`udm.host.spark.streaming.start_stream`.

        One window operation with one UDM over one source runs on the
        incremental host per key (:func:`udm.host.spark.streaming.stream_changelog`,
        whose options ``options`` are: ``advance``, ``cti_policy``, ``seq``,
        ``consistency="speculative"|"conservative"``...); any other query
        runs as its operator graph per key
        (:func:`udm.host.spark.graphstream.stream_query`: ``input``,
        ``advance``, ``cti_policy``, ``seq``, ``consistency`` as
        :meth:`udm.host.query.Stream.with_consistency`, ``state_buckets``)."""
        chain = linear_chain(stream.plan)
        for src in sources(stream.plan):
            if src.df is None or not src.df.isStreaming:
                raise ValueError("to_stream() needs streaming DataFrame sources (spark.readStream)")
        ops = [] if chain is None else [n for n in chain[1] if not isinstance(n, GroupNode)]
        if (
            len(ops) != 1
            or not isinstance(ops[0], WindowOp)
            or len(ops[0].calls) != 1
            or options.get("consistency", "speculative") not in ("speculative", "conservative")
        ):
            # a whole query: its operator graph per key (udm.host.spark.graphstream)
            return stream_query(stream.plan, **options)
        src = stream.source
        op = ops[0]
        if op.emit_empty:
            raise ValueError(
                "emit_empty is not available in streaming queries (the incremental host "
                "runs only non-empty windows); drop emit_empty=True or run the query in batch"
            )
        if op.watermark < INFINITY:
            raise ValueError(
                "watermark= bounds a batch query; a streaming query's time is its CTIs: "
                "drop watermark= and use advance=AdvanceTime(...) or CTI rows"
            )
        call = op.calls[0]
        return stream_changelog(
            src.df,
            op.window,
            call.udm,
            key=list(stream.keys) or None,
            value=call.value,
            start=src.start,
            end=src.end,
            shape=src.shape,
            on_invalid=src.on_invalid,
            input_clipping=op.clipping,
            output_policy=op.policy,
            returns=call.returns,
            name=call.name,
            **options,
        )
