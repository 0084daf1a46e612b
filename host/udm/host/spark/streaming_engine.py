"""Structured Streaming as an engine: ``Stream.to_stream()``.

A query made of one window operation with one UDM runs the incremental host
per key (:func:`udm.host.spark.streaming.stream_changelog`); any other
query runs its operator graph per key
(:func:`udm.host.spark.graphstream.stream_query`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pyspark.sql import DataFrame

from udm.host.plan import GroupNode, PlanNode, WindowOp, linear_chain, rewrite_sources, sources
from udm.host.spark.graphstream import stream_query
from udm.host.spark.streaming import stream_changelog
from udm.host.time import INFINITY

__all__ = ["StreamingEngine"]

#: options of ``stream_changelog`` that a query already carries, and where
#: it carries them: ``to_stream`` refuses them, saying so, rather than fail
#: with "got multiple values" (or override the query's own, or be ignored)
QUERY_OPTIONS = {
    "key": "from_dataframe(key=...) or group_apply(...)",
    "value": "aggregate(udm, value=...)",
    "start": "from_dataframe(start=...)",
    "end": "from_dataframe(end=...)",
    "shape": "from_dataframe(shape=...)",
    "input_clipping": "aggregate(..., input_clipping=...) or apply(...)",
    "output_policy": "aggregate(..., output_policy=...) or apply(...)",
    "returns": "aggregate(..., returns=...) or apply(...)",
    "name": "aggregate(..., alias=...) or apply(...)",
}


def streamed_plan(plan: PlanNode, options: dict[str, Any]) -> PlanNode:
    """The plan ``to_stream`` runs: ``options`` the query already carries
    (:data:`QUERY_OPTIONS`) refused, and ``on_invalid`` (taken out of
    ``options``), when given, made every source's. It then means the same
    for a single window operation and a whole query, whose sources each
    check their own rows: it replaces ``from_dataframe(on_invalid=...)``."""
    for name, where in QUERY_OPTIONS.items():
        if name in options:
            raise TypeError(
                f"to_stream({name}=...): the query itself says this, as in batch: "
                f"give it to {where}"
            )
    if "on_invalid" not in options:
        return plan
    on_invalid = options.pop("on_invalid")
    if on_invalid not in ("raise", "drop"):
        raise ValueError(f"on_invalid={on_invalid!r}: use 'raise' or 'drop'")
    return rewrite_sources(plan, lambda src: dataclasses.replace(src, on_invalid=on_invalid))


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
        :meth:`udm.host.query.Stream.with_consistency`, ``state_buckets``).
        ``on_invalid`` applies to every source, in place of
        ``from_dataframe``'s."""
        plan = streamed_plan(stream.plan, options)
        chain = linear_chain(plan)
        for src in sources(plan):
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
            return stream_query(plan, **options)
        src = sources(plan)[0]
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
            key=list(plan.keys()) or None,
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
