"""udm.host: the temporal framework that runs UDMs.

It owns event lifetimes, inserts, retractions and CTIs, the canonical history
table, windows, clipping and output policies, and the reference evaluator
every engine is checked against.
"""

from udm.host.cht import Cht, cht_diff, cht_equal, derive_cht
from udm.host.engine import Consistency, Host, OutputId, output_cht, output_cht_by_key
from udm.host.errors import (
    CtiViolationError,
    InvalidElementError,
    InvalidEventError,
    StreamError,
    UdmInvocationError,
)
from udm.host.metrics import QueryMetrics
from udm.host.plan import agg
from udm.host.policies import InputClipping, OutputPolicy, default_output_policy
from udm.host.query import Stream, WindowedStream
from udm.host.reference import evaluate, evaluate_by_key, filter_events, project
from udm.host.registry import register_udm
from udm.host.stream import (
    Cti,
    Element,
    ExternalCti,
    Insert,
    Retract,
    edge_end,
    edge_start,
    point,
)
from udm.host.time import (
    INFINITY,
    MIN_TIME,
    TICKS_PER_SECOND,
    TimeConversionError,
    from_ticks,
    to_duration_ticks,
    to_ticks,
)
from udm.host.validation import CtiPolicy, StreamValidator, ValidationStats, validate
from udm.host.windows import (
    CountByEndWindow,
    CountByStartWindow,
    HoppingWindow,
    SnapshotWindow,
    TumblingWindow,
    WindowSpec,
    window_from_dict,
)
from udm.sdk.events import IntervalEvent, WindowDescriptor

__all__ = [
    "INFINITY",
    "MIN_TIME",
    "TICKS_PER_SECOND",
    "Cht",
    "Consistency",
    "CountByEndWindow",
    "CountByStartWindow",
    "Cti",
    "CtiPolicy",
    "CtiViolationError",
    "Element",
    "ExternalCti",
    "HoppingWindow",
    "Host",
    "InputClipping",
    "Insert",
    "IntervalEvent",
    "InvalidElementError",
    "InvalidEventError",
    "OutputId",
    "OutputPolicy",
    "QueryMetrics",
    "Retract",
    "SnapshotWindow",
    "Stream",
    "StreamError",
    "StreamValidator",
    "TimeConversionError",
    "TumblingWindow",
    "UdmInvocationError",
    "ValidationStats",
    "WindowDescriptor",
    "WindowSpec",
    "WindowedStream",
    "agg",
    "cht_diff",
    "cht_equal",
    "default_output_policy",
    "derive_cht",
    "edge_end",
    "edge_start",
    "evaluate",
    "evaluate_by_key",
    "filter_events",
    "from_ticks",
    "output_cht",
    "output_cht_by_key",
    "point",
    "project",
    "register_udm",
    "to_duration_ticks",
    "to_ticks",
    "validate",
    "window_from_dict",
]
