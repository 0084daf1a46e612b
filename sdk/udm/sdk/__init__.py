"""udm.sdk: write user-defined aggregates, operators and functions.

Importing the SDK never imports Spark: UDM libraries depend on this package
alone, and the host (``udm.host``) runs them in-process or on Spark.
"""

from udm.sdk.base import (
    Aggregate,
    IncrementalAggregate,
    IncrementalOperator,
    Operator,
    TimeSensitiveAggregate,
    TimeSensitiveIncrementalAggregate,
    TimeSensitiveIncrementalOperator,
    TimeSensitiveOperator,
    Udm,
    UdmKind,
)
from udm.sdk.decorators import Function, aggregate, function, operator
from udm.sdk.errors import UdmDefinitionError
from udm.sdk.events import INFINITY, MIN_TIME, IntervalEvent, Ticks, WindowDescriptor
from udm.sdk.hooks import hookimpl
from udm.sdk.payloads import pick
from udm.sdk.properties import Properties

__all__ = [
    "INFINITY",
    "MIN_TIME",
    "Aggregate",
    "Function",
    "IncrementalAggregate",
    "IncrementalOperator",
    "IntervalEvent",
    "Operator",
    "Properties",
    "Ticks",
    "TimeSensitiveAggregate",
    "TimeSensitiveIncrementalAggregate",
    "TimeSensitiveIncrementalOperator",
    "TimeSensitiveOperator",
    "Udm",
    "UdmDefinitionError",
    "UdmKind",
    "WindowDescriptor",
    "aggregate",
    "function",
    "hookimpl",
    "operator",
    "pick",
]

__version__ = "0.1.0"
