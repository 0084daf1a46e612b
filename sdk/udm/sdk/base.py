"""Base classes for user-defined aggregates (UDAs) and operators (UDOs).

A UDM writer makes two decisions, as in the paper: time-insensitive or
time-sensitive (payloads vs events with lifetimes and the window
descriptor), and non-incremental or incremental (a whole window at once vs
add/remove deltas on a per-window state). That gives four flavors each of
aggregate and operator:

* :class:`Aggregate`, :class:`Operator`: time-insensitive, non-incremental;
* :class:`TimeSensitiveAggregate`, :class:`TimeSensitiveOperator`;
* :class:`IncrementalAggregate`, :class:`IncrementalOperator`;
* :class:`TimeSensitiveIncrementalAggregate`,
  :class:`TimeSensitiveIncrementalOperator`.

Aggregates return one value per window, operators zero or more outputs.

Every concrete subclass is checked when the class is created: the required
methods exist with sane signatures, and the declared :class:`Properties`
agree with what the class implements.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterable, Sequence
from types import FrameType
from typing import Any, ClassVar, Literal

from udm.sdk.errors import UdmDefinitionError
from udm.sdk.events import IntervalEvent, WindowDescriptor
from udm.sdk.properties import Properties

__all__ = [
    "Aggregate",
    "IncrementalAggregate",
    "IncrementalOperator",
    "Operator",
    "TimeSensitiveAggregate",
    "TimeSensitiveIncrementalAggregate",
    "TimeSensitiveIncrementalOperator",
    "TimeSensitiveOperator",
    "Udm",
    "UdmKind",
]

UdmKind = Literal["aggregate", "operator", "function"]


def _snake(name: str) -> str:
    """``MyAverage`` -> ``my_average``; acronyms stay whole (``HTTPCount`` -> ``http_count``)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


class Udm:
    """Common root of every UDA and UDO class.

    Class attributes a UDM writer may set:

    * ``properties``: a :class:`Properties` declaration (defaults derived).
    * ``name``: the short name used when registering (default: the class
      name in snake case).
    """

    kind: ClassVar[UdmKind]
    time_sensitive: ClassVar[bool] = False
    incremental: ClassVar[bool] = False
    properties: ClassVar[Properties] = Properties()
    # What the class (or its nearest ancestor) declared, before derivation:
    # a subclass re-derives from it instead of inheriting resolved values.
    _declared_properties: ClassVar[Properties] = Properties()
    name: ClassVar[str] = ""
    # Set on the flavor base classes themselves; concrete UDMs are validated.
    _flavor_base: ClassVar[bool] = True
    # method name -> number of positional parameters after self
    _required: ClassVar[dict[str, int]] = {}
    _optional: ClassVar[dict[str, int]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_flavor_base", False):
            return
        cls._flavor_base = False
        if cls.__dict__.get("name") is None:  # "" is a name given, and refused
            cls.name = _snake(cls.__name__)
        if not _rebuilt_by_cloudpickle():
            _validate_class(cls)

    @classmethod
    def flavor(cls) -> str:
        """Human-readable flavor, e.g. ``"time-sensitive incremental aggregate"``."""
        parts = ["time-sensitive" if cls.time_sensitive else "time-insensitive"]
        parts.append("incremental" if cls.incremental else "non-incremental")
        parts.append(cls.kind)
        return " ".join(parts)

    @classmethod
    def implements(cls, method: str) -> bool:
        """Whether the class overrides ``method`` of its flavor base class."""
        for klass in cls.__mro__:
            if method in klass.__dict__:
                return not klass.__dict__.get("_flavor_base", False)
        return False

    def __repr__(self) -> str:
        return f"<{self.flavor()} {type(self).__qualname__}>"


def _rebuilt_by_cloudpickle() -> bool:
    """Whether the class being created is cloudpickle's empty skeleton of a
    class pickled by value (one defined in a script or a function, sent to
    Spark's workers), whose methods are set only after it is created. It
    was validated where it was defined."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return False
        if "cloudpickle" in frame.f_globals.get("__name__", ""):
            return True
        frame = frame.f_back
    return False


def _positional_count(cls: type, method: str) -> tuple[int, bool]:
    """(number of positional parameters excluding self, accepts *args)."""
    params = list(inspect.signature(getattr(cls, method)).parameters.values())
    # A plain function in a class receives the instance first, whatever that
    # parameter is called; static and class methods do not.
    raw = inspect.getattr_static(cls, method)
    if inspect.isfunction(raw) and params and params[0].kind is not params[0].VAR_POSITIONAL:
        params = params[1:]
    var = any(p.kind is p.VAR_POSITIONAL for p in params)
    count = sum(
        1
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    )
    return count, var


_FLAVORS = (
    "Aggregate, TimeSensitiveAggregate, IncrementalAggregate, "
    "TimeSensitiveIncrementalAggregate, Operator, TimeSensitiveOperator, "
    "IncrementalOperator or TimeSensitiveIncrementalOperator"
)
#: a UDM's name: what it is registered, listed and called in SQL under
UDM_NAME_PATTERN = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z", re.ASCII)


def _flavor_bases(cls: type) -> list[type]:
    """The flavor base classes ``cls`` derives from (exactly one is right)."""
    return [
        k
        for k in cls.__mro__[1:]
        if k.__dict__.get("_flavor_base", False) and issubclass(k, Udm) and k is not Udm
    ]


def _validate_methods(cls: type[Udm], where: str) -> None:
    """The UDM's methods: plain functions (not async, a generator only for an
    operator's compute_result), every required one there, each taking the
    arguments its flavor calls it with."""
    for method in (*cls._required, *cls._optional):
        fn = inspect.getattr_static(cls, method, None)
        fn = getattr(fn, "__func__", fn)  # static and class methods
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            raise UdmDefinitionError(
                f"{where}.{method} is async; UDM methods are plain functions (the host "
                "calls them and uses what they return)"
            )
        if inspect.isgeneratorfunction(fn) and not (
            method == "compute_result" and cls.kind == "operator"
        ):
            raise UdmDefinitionError(
                f"{where}.{method} is a generator (it yields); only an operator's "
                "compute_result may yield its outputs: return the value instead"
            )
    for method, arity in cls._required.items():
        if not cls.implements(method):
            raise UdmDefinitionError(
                f"{where} is a {cls.flavor()} but does not implement {method}(); "
                f"define {method} with {arity} argument(s) besides self"
            )
    for method, arity in {**cls._required, **cls._optional}.items():
        if not cls.implements(method):
            continue
        fn = getattr(cls, method)
        if not callable(fn):
            raise UdmDefinitionError(f"{where}.{method} must be a method, not {type(fn).__name__}")
        count, var = _positional_count(cls, method)
        if count != arity and not (var and count <= arity):
            raise UdmDefinitionError(
                f"{where}.{method} takes {count} required argument(s) besides self, "
                f"but a {cls.flavor()} calls it with {arity}"
            )


def _validate_class(cls: type[Udm]) -> None:
    where = f"{cls.__module__}.{cls.__qualname__}"
    flavors = _flavor_bases(cls)
    if len(flavors) != 1:
        got = "none" if not flavors else ", ".join(k.__name__ for k in flavors)
        raise UdmDefinitionError(
            f"{where} must derive from exactly one UDM flavor base class ({_FLAVORS}); "
            f"it derives from {got}"
        )
    name = cls.name
    if not isinstance(name, str) or not UDM_NAME_PATTERN.match(name):
        raise UdmDefinitionError(
            f"{where}.name is {name!r}; a UDM name is an identifier (letters, digits, "
            "underscores), or dotted identifiers for a UDM used in-process (a library's "
            "UDMs take the library's prefix, as in stats.median)"
        )
    _validate_methods(cls, where)
    declared = cls.__dict__.get("properties", cls._declared_properties)
    if not isinstance(declared, Properties):
        raise UdmDefinitionError(
            f"{where}.properties must be a udm.sdk.Properties, not {type(declared).__name__}"
        )
    # remove and merge mean something to incremental UDMs only: a helper of
    # that name on another flavor does not make it invertible or mergeable
    has_remove = cls.incremental and cls.implements("remove")
    has_merge = cls.incremental and cls.implements("merge")
    for prop in ("invertible", "mergeable"):
        if getattr(declared, prop) and not cls.incremental:
            raise UdmDefinitionError(
                f"{where} declares {prop}=True, which applies to incremental UDMs only "
                f"(a {cls.flavor()} recomputes each window from its events); drop the "
                "declaration, or derive from an incremental flavor"
            )
    derivable = ("invertible", "mergeable", "output_within_window")
    for prop, value in declared.as_dict().items():
        if not isinstance(value, bool) and not (value is None and prop in derivable):
            raise UdmDefinitionError(
                f"{where} declares {prop}={value!r}; properties are True or False"
            )
    if declared.invertible and not has_remove:
        raise UdmDefinitionError(
            f"{where} declares invertible=True but has no remove(); implement remove() "
            "or drop the declaration (the host then recomputes windows from their events)"
        )
    if declared.mergeable and not has_merge:
        raise UdmDefinitionError(
            f"{where} declares mergeable=True but has no merge(); implement merge(a, b) "
            "or drop the declaration"
        )
    timestamps_output = cls.kind == "operator" and cls.time_sensitive
    if (declared.output_within_window is not None or declared.time_bound) and not timestamps_output:
        prop = "time_bound" if declared.time_bound else "output_within_window"
        raise UdmDefinitionError(
            f"{where} declares {prop}, which only applies to time-sensitive operators "
            "(they timestamp their own output)"
        )
    derived: dict[str, bool] = {"invertible": has_remove, "mergeable": has_merge}
    if cls.kind == "operator" and cls.time_sensitive:
        derived["output_within_window"] = True
    else:
        derived["output_within_window"] = False
    cls._declared_properties = declared
    cls.properties = declared.resolved(**derived)


class Aggregate(Udm):
    """Time-insensitive, non-incremental aggregate: payloads in, one value out.

    Example:
        >>> from statistics import median
        >>> class Median(Aggregate):
        ...     def compute_result(self, payloads):
        ...         return median(payloads)
        >>> Median().compute_result([3, 1, 2])
        2
    """

    kind: ClassVar[UdmKind] = "aggregate"
    _flavor_base = True
    _required: ClassVar[dict[str, int]] = {"compute_result": 1}

    def compute_result(self, payloads: Sequence[Any]) -> Any:
        """The aggregate of the payloads of all events in one window."""
        raise NotImplementedError


class TimeSensitiveAggregate(Udm):
    """Time-sensitive, non-incremental aggregate: events with lifetimes and the
    window descriptor in, one value out.

    Example (the paper's time-weighted average):
        >>> class TimeWeightedAverage(TimeSensitiveAggregate):
        ...     def compute_result(self, events, window):
        ...         total = sum(e.payload * (e.end - e.start) for e in events)
        ...         return total / (window.end - window.start)
        >>> from udm.sdk import IntervalEvent, WindowDescriptor
        >>> TimeWeightedAverage().compute_result(
        ...     [IntervalEvent(0, 5, 2.0), IntervalEvent(5, 10, 4.0)], WindowDescriptor(0, 10))
        3.0
    """

    kind: ClassVar[UdmKind] = "aggregate"
    time_sensitive: ClassVar[bool] = True
    _flavor_base = True
    _required: ClassVar[dict[str, int]] = {"compute_result": 2}

    def compute_result(self, events: Sequence[IntervalEvent[Any]], window: WindowDescriptor) -> Any:
        """The aggregate of the (clipped) events of one window."""
        raise NotImplementedError


class _IncrementalMixin:
    """Shared documentation of the incremental contract."""

    _flavor_base: ClassVar[bool] = True

    def initial_state(self) -> Any:
        """A fresh state for an empty window."""
        raise NotImplementedError


class IncrementalAggregate(Udm, _IncrementalMixin):
    """Time-insensitive incremental aggregate: a per-window state updated by
    ``add`` and (optionally) ``remove``, read by ``result``.

    ``add`` and ``remove`` return the new state (they may mutate and return
    the old one). Without ``remove`` the host recomputes a window from its
    events when one leaves; with ``merge`` it can combine partial states.
    ``add_many`` may be overridden with a faster equivalent of ``add`` in a
    loop (one ``sum``, a numpy call): batch execution adds a window's or a
    pane's payloads through it in one call.

    Example:
        >>> class Mean(IncrementalAggregate):
        ...     def initial_state(self):
        ...         return (0.0, 0)
        ...     def add(self, state, payload):
        ...         return (state[0] + payload, state[1] + 1)
        ...     def remove(self, state, payload):
        ...         return (state[0] - payload, state[1] - 1)
        ...     def merge(self, a, b):
        ...         return (a[0] + b[0], a[1] + b[1])
        ...     def result(self, state):
        ...         return state[0] / state[1]
        >>> Mean.properties.invertible, Mean.properties.mergeable
        (True, True)
    """

    kind: ClassVar[UdmKind] = "aggregate"
    incremental: ClassVar[bool] = True
    _flavor_base = True
    _required: ClassVar[dict[str, int]] = {"initial_state": 0, "add": 2, "result": 1}
    _optional: ClassVar[dict[str, int]] = {
        "remove": 2,
        "merge": 2,
        "add_many": 2,
        "add_segments": 2,
    }

    def add(self, state: Any, payload: Any) -> Any:
        """The state after adding one payload."""
        raise NotImplementedError

    def add_many(self, state: Any, payloads: Sequence[Any]) -> Any:
        """The state after adding ``payloads`` (a list, in order) one by one.

        Override it only with something equivalent to this loop; the
        fixture runner checks that it is (see docs/writing-udms.md, "Adding many
        payloads at once").
        """
        for payload in payloads:
            state = self.add(state, payload)
        return state

    def add_segments(self, values: Any, bounds: Any) -> Sequence[Any]:
        """The states of consecutive segments of ``values``, one per segment:
        segment ``i`` is ``values[bounds[i]:bounds[i + 1]]`` (never empty),
        and its state must equal ``add_many(initial_state(), segment)``.

        An optional vectorized form of ``add_many`` over many windows at
        once: ``values`` is a one-dimensional numpy array of numbers (the
        payloads of a value column without nulls, in canonical order) and
        ``bounds`` a numpy int64 array of ``len(states) + 1`` increasing
        offsets, so numpy segment reductions (``np.add.reduceat(values,
        bounds[:-1])``, ``np.diff(bounds)``) compute every window's state in
        one call instead of one ``add_many`` call per window. Batch
        execution on Spark calls it where windows do not overlap; the
        fixture runner checks it agrees with ``add`` (docs/writing-udms.md,
        "Adding many windows at once"). Unlike ``add_many`` it has no
        default: an equivalent loop would need numpy in the SDK and would
        gain nothing, so only a UDA that defines it is called this way.
        """
        raise NotImplementedError

    def remove(self, state: Any, payload: Any) -> Any:
        """The state after removing one payload that was added before."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        """A state equivalent to adding everything in ``a`` and ``b``. It
        may update and return ``a`` (or return ``b``), but must leave ``b``
        unchanged: the engine may still read it."""
        raise NotImplementedError

    def result(self, state: Any) -> Any:
        """The aggregate value of a (non-empty) window state."""
        raise NotImplementedError


class TimeSensitiveIncrementalAggregate(Udm, _IncrementalMixin):
    """Time-sensitive incremental aggregate: ``add``/``remove`` receive each
    event with its (clipped) lifetime and the window descriptor.

    Example (time-weighted average over the window's duration):
        >>> class Twa(TimeSensitiveIncrementalAggregate):
        ...     def initial_state(self):
        ...         return 0.0
        ...     def add(self, state, event, window):
        ...         return state + event.payload * (event.end - event.start)
        ...     def remove(self, state, event, window):
        ...         return state - event.payload * (event.end - event.start)
        ...     def result(self, state, window):
        ...         return state / (window.end - window.start)
    """

    kind: ClassVar[UdmKind] = "aggregate"
    time_sensitive: ClassVar[bool] = True
    incremental: ClassVar[bool] = True
    _flavor_base = True
    _required: ClassVar[dict[str, int]] = {"initial_state": 0, "add": 3, "result": 2}
    _optional: ClassVar[dict[str, int]] = {"remove": 3, "merge": 2}

    def add(self, state: Any, event: IntervalEvent[Any], window: WindowDescriptor) -> Any:
        """The state after adding one ``event`` (its lifetime clipped as the query says) of
        ``window``: the lifetime is there to weigh the payload by time."""
        raise NotImplementedError

    def remove(self, state: Any, event: IntervalEvent[Any], window: WindowDescriptor) -> Any:
        """The state after removing an ``event`` that :meth:`add` added to ``window`` before (with
        the same lifetime): what makes the aggregate invertible."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        """A state equivalent to adding everything in ``a`` and ``b`` (as
        :meth:`IncrementalAggregate.merge`): what lets engines aggregate parts apart."""
        raise NotImplementedError

    def result(self, state: Any, window: WindowDescriptor) -> Any:
        """The aggregate value of a (non-empty) state of ``window``: the window's bounds are there
        for results that depend on its duration."""
        raise NotImplementedError


class Operator(Udm):
    """Time-insensitive, non-incremental operator: payloads in, zero or more
    output payloads out (each becomes an event with the window's lifetime).

    Example:
        >>> class Distinct(Operator):
        ...     def compute_result(self, payloads):
        ...         return sorted(set(payloads))
        >>> Distinct().compute_result([2, 1, 2])
        [1, 2]
    """

    kind: ClassVar[UdmKind] = "operator"
    _flavor_base = True
    _required: ClassVar[dict[str, int]] = {"compute_result": 1}

    def compute_result(self, payloads: Sequence[Any]) -> Iterable[Any]:
        """The output payloads of one window, from all its payloads: each becomes an event with the
        window's lifetime (none: the window has no output)."""
        raise NotImplementedError


class TimeSensitiveOperator(Udm):
    """Time-sensitive, non-incremental operator: events and the window in,
    zero or more output events, with lifetimes the operator chooses, out.

    Example (emit each rise above a threshold as a point event):
        >>> from udm.sdk import IntervalEvent
        >>> class Above(TimeSensitiveOperator):
        ...     def __init__(self, threshold=10):
        ...         self.threshold = threshold
        ...     def compute_result(self, events, window):
        ...         return [IntervalEvent(e.start, e.start + 1, e.payload)
        ...                 for e in sorted(events, key=lambda e: e.start)
        ...                 if e.payload > self.threshold]
    """

    kind: ClassVar[UdmKind] = "operator"
    time_sensitive: ClassVar[bool] = True
    _flavor_base = True
    _required: ClassVar[dict[str, int]] = {"compute_result": 2}

    def compute_result(
        self, events: Sequence[IntervalEvent[Any]], window: WindowDescriptor
    ) -> Iterable[IntervalEvent[Any]]:
        """The output events of one window, from its events (lifetimes clipped as the query says)
        and the window: the operator chooses the lifetimes."""
        raise NotImplementedError


class IncrementalOperator(Udm, _IncrementalMixin):
    """Time-insensitive incremental operator: a state maintained by
    ``add``/``remove``; ``result`` returns zero or more output payloads."""

    kind: ClassVar[UdmKind] = "operator"
    incremental: ClassVar[bool] = True
    _flavor_base = True
    _required: ClassVar[dict[str, int]] = {"initial_state": 0, "add": 2, "result": 1}
    _optional: ClassVar[dict[str, int]] = {"remove": 2, "merge": 2, "add_many": 2}

    def add(self, state: Any, payload: Any) -> Any:
        """The state after adding one payload (as :meth:`IncrementalAggregate.add`)."""
        raise NotImplementedError

    def add_many(self, state: Any, payloads: Sequence[Any]) -> Any:
        """As :meth:`IncrementalAggregate.add_many`: ``add`` for each payload."""
        for payload in payloads:
            state = self.add(state, payload)
        return state

    def remove(self, state: Any, payload: Any) -> Any:
        """The state after removing one payload added before: what lets a window's output be
        updated instead of recomputed when an event leaves."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        """A state equivalent to adding everything in ``a`` and ``b`` (as
        :meth:`IncrementalAggregate.merge`)."""
        raise NotImplementedError

    def result(self, state: Any) -> Iterable[Any]:
        """The output payloads of a window's state, each becoming an event with the window's
        lifetime."""
        raise NotImplementedError


class TimeSensitiveIncrementalOperator(Udm, _IncrementalMixin):
    """Time-sensitive incremental operator: ``add``/``remove`` receive events
    and the window; ``result`` returns output events with lifetimes."""

    kind: ClassVar[UdmKind] = "operator"
    time_sensitive: ClassVar[bool] = True
    incremental: ClassVar[bool] = True
    _flavor_base = True
    _required: ClassVar[dict[str, int]] = {"initial_state": 0, "add": 3, "result": 2}
    _optional: ClassVar[dict[str, int]] = {"remove": 3, "merge": 2}

    def add(self, state: Any, event: IntervalEvent[Any], window: WindowDescriptor) -> Any:
        """The state after adding one ``event`` of ``window`` (its lifetime clipped as the query
        says)."""
        raise NotImplementedError

    def remove(self, state: Any, event: IntervalEvent[Any], window: WindowDescriptor) -> Any:
        """The state after removing an ``event`` that :meth:`add` added to ``window`` before."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        """A state equivalent to adding everything in ``a`` and ``b`` (as
        :meth:`IncrementalAggregate.merge`)."""
        raise NotImplementedError

    def result(self, state: Any, window: WindowDescriptor) -> Iterable[IntervalEvent[Any]]:
        """The output events of ``window`` from its state, with lifetimes the operator chooses."""
        raise NotImplementedError
