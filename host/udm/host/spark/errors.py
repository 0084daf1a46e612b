"""udm's own errors from Spark actions, without the JVM noise.

A UDM that raises in a Spark worker, or an invalid row under
``on_invalid="raise"``, fails the Spark job: PySpark raises its own
``PythonException``/``SparkRuntimeException`` (with
``[USER_RAISED_EXCEPTION] ... SQLSTATE`` wrappers and the worker's
traceback), and Spark's executor logs the Java stack trace of every
failed task at ERROR. :func:`udm_frame` makes the DataFrame that
``Stream.to_dataframe()`` returns raise the udm error behind such a
failure (:class:`~udm.host.UdmInvocationError`,
:class:`~udm.host.InvalidEventError`, ...) from every action, as
``to_cht()`` does, and DataFrames derived from it do the same.
:func:`quiet_task_failures` keeps the executor's duplicate of the error
out of the terminal unless the ``udm.spark`` logger is at DEBUG; the
original Spark exception stays available as the error's ``spark_error``.
"""

from __future__ import annotations

import functools
import logging
import re
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame

from udm.host.errors import InvalidEventError, OperatorError, UdmInvocationError
from udm.host.rows import UdfError
from udm.host.spark.invalid import summarized

#: At DEBUG, the Spark exception behind each udm error is logged here, and
#: Spark's task failure logs are not cut
LOGGER = logging.getLogger("udm.spark")


class SparkUdmInvocationError(UdmInvocationError):
    """A UDM failed inside a Spark worker; the message is the worker's."""

    def __init__(self, message: str) -> None:
        self.udm = message.split("'")[1] if message.count("'") >= 2 else ""
        self.window = None
        self.element = None
        RuntimeError.__init__(self, message)


def translate_error(exc: Exception) -> Exception | None:
    """The udm error behind a Spark exception (a UDM failure in a worker,
    an invalid row, a window error), without the JVM noise."""
    text = str(exc)
    m = re.search(r"udm\.host\.errors\.UdmInvocationError: (.*)", text)
    if m:
        return SparkUdmInvocationError(m.group(1).strip())
    m = re.search(r"udm\.host\.errors\.OperatorError: (.*?)(?: SQLSTATE: \w+)?$", text, re.M)
    if m:
        return OperatorError("", m.group(1).strip())
    m = re.search(r"udm\.host\.rows\.UdfError: (.*)", text)
    if m:  # a join's where/select failed (or select returned no dict)
        return UdfError(m.group(1).strip())
    m = re.search(r"(invalid event: .*?)(?: SQLSTATE: \w+)?$", text, re.S)
    if m:
        return InvalidEventError(m.group(1).strip())
    m = re.search(r"\[USER_RAISED_EXCEPTION\] (.*?)(?: SQLSTATE: \w+)?$", text, re.S)
    if m:
        return ValueError(m.group(1).strip())
    m = re.search(r"\n(\w*(?:Type|Value|Key)Error): (.*)", text)
    if m:
        name, message = m.group(1), m.group(2).strip()
        if name == "TypeError":  # a result of the wrong type: what udm raises in-process
            return TypeError(message)
        return ValueError(message if name == "ValueError" else f"{name}: {message}")
    return None


@contextmanager
def udm_errors() -> Iterator[None]:
    """Re-raise an error of a Spark action as the udm error behind it (see
    :func:`translate_error`); others pass unchanged."""
    from pyspark.errors import PySparkException

    try:
        yield
    except PySparkException as exc:
        translated = translate_error(exc)
        if translated is None:
            raise
        # kept, not chained: the chain would print Spark's text again
        translated.spark_error = exc  # type: ignore[attr-defined]
        LOGGER.debug("Spark error behind %s", type(translated).__name__, exc_info=exc)
        raise translated from None


__all__ = [
    "LOGGER",
    "SparkUdmInvocationError",
    "quiet_task_failures",
    "running",
    "spark_message",
    "translate_error",
    "udm_errors",
    "udm_frame",
]

#: the Spark loggers that log a failed task's Java stack trace at ERROR
_TASK_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.scheduler.TaskSchedulerImpl",
)


def spark_message(exc: BaseException) -> str:
    """The message to show for an error of a Spark action: udm's own for a
    failure udm knows (no ``[USER_RAISED_EXCEPTION]``, SQLSTATE or worker
    traceback), else the first line of Spark's, without Py4J's
    ``An error occurred while calling o41.load`` preamble."""
    if isinstance(exc, PySparkException):
        translated = translate_error(exc)
        if translated is not None:
            return str(translated)
    text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("An error occurred while calling")]
    if not lines:
        return type(exc).__name__
    # a Java exception's class (": org.apache.spark.SparkException: ...")
    first = re.sub(r"^:?\s*(?:[\w$]+\.)+\w*(?:Exception|Error):\s*", "", lines[0]) or lines[0]
    if isinstance(exc, KeyError) and first[:1] in "'\"" and first[-1:] == first[:1]:
        first = first[1:-1]  # KeyError quotes its message
    return first


@contextmanager
def running(source: Any) -> Iterator[None]:
    """Around planning and running a query on Spark (some plans run jobs,
    to type results from their values): udm's errors, an invalid row's
    count and first rows (``source``: the stream's Source), no task logs."""
    df = getattr(source, "df", None)
    if df is not None:
        quiet_task_failures(df.sparkSession)
    with summarized(source), udm_errors():
        yield


#: SparkContexts whose task loggers are already cut: once per context, since
#: the lookups through py4j were some 40 round trips per query planned
_QUIETED: weakref.WeakSet[Any] = weakref.WeakSet()


def quiet_task_failures(spark: Any) -> None:
    """Cut Spark's per-task failure logs (a Java stack trace each, the same
    error the action raises) to FATAL, unless :data:`LOGGER` is at DEBUG;
    once per SparkContext. A no-op without a JVM here (Spark Connect: the
    server logs)."""
    if LOGGER.isEnabledFor(logging.DEBUG):
        return
    try:
        sc = spark.sparkContext
        if sc in _QUIETED:
            return
        jvm = sc._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        fatal = jvm.org.apache.logging.log4j.Level.FATAL
        for name in _TASK_LOGGERS:
            configurator.setLevel(name, fatal)
        _QUIETED.add(sc)
    except Exception:  # Spark Connect, or another logging backend
        return


# --------------------------------------------------- DataFrames that translate


_WRAPPED: dict[type, type] = {}
#: properties whose values run actions (writers) or return DataFrames
_PROPERTIES = ("write", "writeTo", "na", "stat")


def _translating(value: Any, source: Any) -> Any:
    """``value``, translating errors if it is a DataFrame or a writer."""
    if isinstance(value, DataFrame) or type(value).__name__ in (
        "DataFrameWriter",
        "DataFrameWriterV2",
        "DataFrameNaFunctions",
        "DataFrameStatFunctions",
        "GroupedData",
    ):
        return _wrap(value, source)
    return value


def _method(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def translated(self: Any, *args: Any, **kwargs: Any) -> Any:
        source = self.__dict__.get("_udm_source")
        with summarized(source), udm_errors(), warnings.catch_warnings():
            # toPandas warns with the worker's whole traceback before it
            # raises: the error raised says it, once
            warnings.filterwarnings("ignore", "toPandas attempted Arrow", UserWarning)
            return _translating(fn(self, *args, **kwargs), source)

    return translated


def _prop(name: str) -> property:
    def get(self: Any) -> Any:
        value = getattr(super(type(self), self), name)
        return _translating(value, self.__dict__.get("_udm_source"))

    return property(get)


def _wrapper_class(base: type) -> type:
    """A subclass of ``base`` whose public methods raise udm's errors and
    return wrapped DataFrames and writers."""
    cls = _WRAPPED.get(base)
    if cls is not None:
        return cls
    namespace: dict[str, Any] = {"__doc__": base.__doc__, "__module__": __name__}
    for name in dir(base):
        if name.startswith("_"):
            continue
        attr = getattr(base, name, None)
        if isinstance(attr, property) and name in _PROPERTIES:
            namespace[name] = _prop(name)
        elif callable(attr) and not isinstance(attr, type | staticmethod | classmethod):
            raw = base.__dict__.get(name) or next(
                (k.__dict__[name] for k in base.__mro__ if name in k.__dict__), None
            )
            if raw is None or isinstance(raw, staticmethod | classmethod):
                continue
            namespace[name] = _method(attr)
    cls = type(base.__name__, (base,), namespace)
    _WRAPPED[base] = cls
    return cls


def _wrap(obj: Any, source: Any) -> Any:
    if type(obj) not in _WRAPPED.values():
        obj.__class__ = _wrapper_class(type(obj))
    if source is not None:
        obj.__dict__["_udm_source"] = source
    return obj


def udm_frame(df: DataFrame, source: Any = None) -> DataFrame:
    """``df`` (itself, re-classed) with every action raising the udm error
    behind a Spark failure, as :meth:`~udm.host.Stream.to_cht` does; an
    invalid row of ``source`` (a :class:`~udm.host.query.Source`) comes
    with the count of invalid rows and the first few."""
    quiet_task_failures(df.sparkSession)
    wrapped: DataFrame = _wrap(df, source)
    return wrapped
