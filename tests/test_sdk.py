"""The SDK: class-creation checks with helpful errors, derived properties,
names and flavors, decorators with arguments, UDFs, and the docstring
examples."""

from __future__ import annotations

import doctest
import subprocess
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

import udm.sdk.base
import udm.sdk.decorators
from udm.sdk import (
    INFINITY,
    Aggregate,
    Function,
    IncrementalAggregate,
    IncrementalOperator,
    IntervalEvent,
    Operator,
    Properties,
    TimeSensitiveAggregate,
    TimeSensitiveIncrementalAggregate,
    TimeSensitiveIncrementalOperator,
    TimeSensitiveOperator,
    UdmDefinitionError,
    WindowDescriptor,
    aggregate,
    function,
    operator,
)

PREFIX = "test_sdk."


class TestMissingAndMisshapenMethods:
    def test_missing_compute_result(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            class NoCompute(Aggregate):
                pass

        assert str(err.value) == (
            f"{PREFIX}TestMissingAndMisshapenMethods.test_missing_compute_result.<locals>."
            "NoCompute is a time-insensitive non-incremental aggregate but does not implement "
            "compute_result(); define compute_result with 1 argument(s) besides self"
        )

    @pytest.mark.parametrize(
        ("base", "missing", "arity"),
        [
            (IncrementalAggregate, "initial_state", 0),
            (IncrementalAggregate, "add", 2),
            (IncrementalAggregate, "result", 1),
            (TimeSensitiveIncrementalOperator, "add", 3),
            (TimeSensitiveIncrementalOperator, "result", 2),
        ],
    )
    def test_missing_incremental_method(self, base: type, missing: str, arity: int) -> None:
        methods: dict[str, Any] = {
            "initial_state": lambda self: 0,
            "add": (lambda self, s, e, w: s) if base.time_sensitive else (lambda self, s, p: s),
            "result": (lambda self, s, w: s) if base.time_sensitive else (lambda self, s: s),
        }
        del methods[missing]
        with pytest.raises(UdmDefinitionError) as err:
            type("Partial", (base,), methods)
        msg = str(err.value)
        assert "Partial is a " + base.flavor() in msg
        assert f"does not implement {missing}()" in msg
        assert f"define {missing} with {arity} argument(s) besides self" in msg

    def test_wrong_arity(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            class Arity(Aggregate):
                def compute_result(self, payloads: Any, extra: Any) -> Any:
                    return 0

        msg = str(err.value)
        assert "Arity.compute_result takes 2 required argument(s) besides self" in msg
        assert "a time-insensitive non-incremental aggregate calls it with 1" in msg

    def test_time_insensitive_signature_on_time_sensitive_flavor(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            class Twa(TimeSensitiveIncrementalAggregate):
                def initial_state(self) -> int:
                    return 0

                def add(self, state: int, event: Any) -> int:
                    return state

                def result(self, state: int, window: WindowDescriptor) -> int:
                    return state

        msg = str(err.value)
        assert "Twa.add takes 2 required argument(s) besides self" in msg
        assert "a time-sensitive incremental aggregate calls it with 3" in msg

    def test_optional_method_arity_checked(self) -> None:
        with pytest.raises(UdmDefinitionError, match=r"Inc\.remove takes 1 required"):

            class Inc(IncrementalAggregate):
                def initial_state(self) -> int:
                    return 0

                def add(self, state: int, payload: int) -> int:
                    return state

                def remove(self, state: int) -> int:
                    return state

                def result(self, state: int) -> int:
                    return state

    def test_not_a_method(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            class NotCallable(Aggregate):
                compute_result = 5  # type: ignore[assignment]

        assert "NotCallable.compute_result must be a method, not int" in str(err.value)

    def test_varargs_and_defaults_accepted(self) -> None:
        class VarArgs(Aggregate):
            def compute_result(self, *args: Any) -> Any:
                return len(args[0])

        class WithDefault(Aggregate):
            def compute_result(self, payloads: Any, scale: int = 2) -> Any:
                return scale * len(payloads)

        assert VarArgs().compute_result([1, 2]) == 2
        assert WithDefault().compute_result([1, 2]) == 4

    def test_first_parameter_name_does_not_matter(self) -> None:
        class This(Aggregate):
            def compute_result(this, payloads: Sequence[Any]) -> int:
                return len(payloads)

        class Static(Aggregate):
            @staticmethod
            def compute_result(payloads: Sequence[Any]) -> int:
                return 2 * len(payloads)

        Lambda = type("Lambda", (Aggregate,), {"compute_result": lambda s, p: 3 * len(p)})
        assert This().compute_result([1]) == 1
        assert Static().compute_result([1]) == 2
        assert Lambda().compute_result([1]) == 3
        with pytest.raises(UdmDefinitionError, match=r"Lambda2\.compute_result takes 2 required"):
            type("Lambda2", (Aggregate,), {"compute_result": lambda s, p, q: 0})


class TestPropertyContradictions:
    def test_invertible_without_remove(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            class Inv(IncrementalAggregate):
                properties = Properties(invertible=True)

                def initial_state(self) -> int:
                    return 0

                def add(self, state: int, payload: int) -> int:
                    return state + payload

                def result(self, state: int) -> int:
                    return state

        msg = str(err.value)
        assert "Inv declares invertible=True but has no remove()" in msg
        assert "implement remove() or drop the declaration" in msg

    def test_mergeable_without_merge(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            class Mer(IncrementalAggregate):
                properties = Properties(mergeable=True)

                def initial_state(self) -> int:
                    return 0

                def add(self, state: int, payload: int) -> int:
                    return state + payload

                def result(self, state: int) -> int:
                    return state

        msg = str(err.value)
        assert "Mer declares mergeable=True but has no merge()" in msg
        assert "implement merge(a, b) or drop the declaration" in msg

    @pytest.mark.parametrize("base", [Aggregate, Operator])
    def test_time_bound_on_non_timestamping_udm(self, base: type) -> None:
        with pytest.raises(UdmDefinitionError) as err:
            type(
                "Bound",
                (base,),
                {"properties": Properties(time_bound=True), "compute_result": lambda s, p: 0},
            )
        msg = str(err.value)
        assert "Bound declares time_bound" in msg
        assert "only applies to time-sensitive operators (they timestamp their own output)" in msg

    def test_time_bound_on_time_sensitive_aggregate(self) -> None:
        with pytest.raises(UdmDefinitionError, match="TB declares time_bound"):

            class TB(TimeSensitiveAggregate):
                properties = Properties(time_bound=True)

                def compute_result(self, events: Any, window: Any) -> int:
                    return 0

    def test_output_within_window_on_aggregate(self) -> None:
        with pytest.raises(UdmDefinitionError, match="OWW declares output_within_window"):

            class OWW(Aggregate):
                properties = Properties(output_within_window=True)

                def compute_result(self, payloads: Any) -> int:
                    return 0

    def test_properties_must_be_a_properties(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            class BadProps(Aggregate):
                properties = {"deterministic": True}  # type: ignore[assignment]  # noqa: RUF012

                def compute_result(self, payloads: Any) -> int:
                    return 0

        assert "BadProps.properties must be a udm.sdk.Properties, not dict" in str(err.value)


class Mean(IncrementalAggregate):
    def initial_state(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, state: tuple[float, int], payload: float) -> tuple[float, int]:
        return (state[0] + payload, state[1] + 1)

    def remove(self, state: tuple[float, int], payload: float) -> tuple[float, int]:
        return (state[0] - payload, state[1] - 1)

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state: tuple[float, int]) -> float:
        return state[0] / state[1]


class AddOnly(IncrementalOperator):
    def initial_state(self) -> list[Any]:
        return []

    def add(self, state: list[Any], payload: Any) -> list[Any]:
        return [*state, payload]

    def result(self, state: list[Any]) -> Iterable[Any]:
        return state


class Stamped(TimeSensitiveOperator):
    def compute_result(
        self, events: Sequence[IntervalEvent[Any]], window: WindowDescriptor
    ) -> Iterable[IntervalEvent[Any]]:
        return []


class TestDerivedProperties:
    def test_remove_and_merge_make_invertible_and_mergeable(self) -> None:
        p = Mean.properties
        assert (p.invertible, p.mergeable, p.output_within_window) == (True, True, False)
        assert (p.deterministic, p.empty_preserving, p.order_insensitive) == (True, True, True)
        assert p.time_bound is False

    def test_add_only(self) -> None:
        assert (AddOnly.properties.invertible, AddOnly.properties.mergeable) == (False, False)

    def test_time_sensitive_operator_output_within_window(self) -> None:
        assert Stamped.properties.output_within_window is True

    def test_explicit_declarations_win(self) -> None:
        class Leaky(TimeSensitiveOperator):
            properties = Properties(output_within_window=False, deterministic=False)

            def compute_result(self, events: Any, window: Any) -> list[Any]:
                return []

        class NoInvert(IncrementalAggregate):
            properties = Properties(invertible=False)

            def initial_state(self) -> int:
                return 0

            def add(self, state: int, payload: int) -> int:
                return state

            def remove(self, state: int, payload: int) -> int:
                return state

            def result(self, state: int) -> int:
                return state

        assert Leaky.properties.output_within_window is False
        assert Leaky.properties.deterministic is False
        assert NoInvert.properties.invertible is False

    def test_enabled_and_as_dict(self) -> None:
        assert Mean.properties.enabled() == [
            "deterministic",
            "invertible",
            "mergeable",
            "empty_preserving",
            "order_insensitive",
        ]
        assert Properties().as_dict() == {
            "deterministic": True,
            "invertible": None,
            "mergeable": None,
            "empty_preserving": True,
            "order_insensitive": True,
            "output_within_window": None,
            "time_bound": False,
        }

    def test_resolved_fills_only_none(self) -> None:
        p = Properties(invertible=False).resolved(invertible=True, mergeable=True)
        assert (p.invertible, p.mergeable) == (False, True)

    def test_subclass_of_concrete_udm(self) -> None:
        class MyMean(Aggregate):
            def compute_result(self, payloads: Sequence[float]) -> float:
                return sum(payloads) / len(payloads)

        class RoundedMean(MyMean):
            def compute_result(self, payloads: Sequence[float]) -> float:
                return round(super().compute_result(payloads))

        assert RoundedMean().compute_result([1.0, 2.0, 2.0]) == 2
        assert RoundedMean.properties == MyMean.properties
        assert RoundedMean.name == "rounded_mean"

    def test_subclass_rederives_from_what_it_implements(self) -> None:
        class Sum(IncrementalAggregate):
            def initial_state(self) -> int:
                return 0

            def add(self, state: int, payload: int) -> int:
                return state + payload

            def result(self, state: int) -> int:
                return state

        class InvertibleSum(Sum):
            def remove(self, state: int, payload: int) -> int:
                return state - payload

        assert Sum.properties.invertible is False
        assert InvertibleSum.properties.invertible is True

    def test_subclass_inherits_declarations(self) -> None:
        class Sampler(Operator):
            properties = Properties(deterministic=False)

            def compute_result(self, payloads: Sequence[Any]) -> list[Any]:
                return list(payloads)[:1]

        class Sampler2(Sampler):
            pass

        assert Sampler2.properties.deterministic is False


class TestNamesAndFlavors:
    @pytest.mark.parametrize(
        ("cls", "flavor"),
        [
            (Aggregate, "time-insensitive non-incremental aggregate"),
            (TimeSensitiveAggregate, "time-sensitive non-incremental aggregate"),
            (IncrementalAggregate, "time-insensitive incremental aggregate"),
            (TimeSensitiveIncrementalAggregate, "time-sensitive incremental aggregate"),
            (Operator, "time-insensitive non-incremental operator"),
            (TimeSensitiveOperator, "time-sensitive non-incremental operator"),
            (IncrementalOperator, "time-insensitive incremental operator"),
            (TimeSensitiveIncrementalOperator, "time-sensitive incremental operator"),
        ],
    )
    def test_flavor_strings(self, cls: type, flavor: str) -> None:
        assert cls.flavor() == flavor

    def test_flavor_of_concrete_classes(self) -> None:
        assert Mean.flavor() == "time-insensitive incremental aggregate"
        assert Stamped.flavor() == "time-sensitive non-incremental operator"
        assert repr(Mean()) == "<time-insensitive incremental aggregate Mean>"

    @pytest.mark.parametrize(
        ("class_name", "expected"),
        [
            ("MyAverage", "my_average"),
            ("Mean", "mean"),
            ("HTTPRequestCount", "http_request_count"),
            ("TopK", "top_k"),
            ("P99Latency", "p99_latency"),
            ("EWMA", "ewma"),
        ],
    )
    def test_default_name_is_snake_case(self, class_name: str, expected: str) -> None:
        cls = type(class_name, (Aggregate,), {"compute_result": lambda self, p: 0})
        assert cls.name == expected

    def test_explicit_name(self) -> None:
        class Whatever(Aggregate):
            name = "custom"

            def compute_result(self, payloads: Any) -> int:
                return 0

        assert Whatever.name == "custom"

    def test_implements(self) -> None:
        assert Mean.implements("remove")
        assert not AddOnly.implements("remove")
        assert not AddOnly.implements("merge")
        assert AddOnly.implements("add")


class TestDecorators:
    def test_aggregate_with_argument(self) -> None:
        @aggregate
        def quantile(values: Sequence[float], q: float = 0.5) -> float:
            ordered = sorted(values)
            return ordered[round(q * (len(ordered) - 1))]

        data = [float(v) for v in range(11)]
        assert quantile.flavor() == "time-insensitive non-incremental aggregate"
        assert quantile.name == "quantile"
        assert quantile(q=0.9).compute_result(data) == 9.0
        assert quantile().compute_result(data) == 5.0
        assert quantile(q=0.9).args == {"q": 0.9}
        assert quantile().args == {}
        assert repr(quantile(q=0.9)) == "quantile(q=0.9)"
        assert quantile(q=0.9) == quantile(q=0.9)
        assert quantile(q=0.9) != quantile(q=0.5)
        assert hash(quantile(q=0.9)) == hash(quantile(q=0.9))
        assert quantile.__wrapped__(data, q=0.1) == 1.0
        assert issubclass(quantile, Aggregate)

    def test_unknown_argument(self) -> None:
        @aggregate
        def quantile(values: Sequence[float], q: float = 0.5) -> float:
            return 0.0

        with pytest.raises(TypeError) as err:
            quantile(z=1)
        assert "bad arguments for UDM 'quantile'" in str(err.value)
        assert "'z'" in str(err.value)

    def test_argument_without_default(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            @aggregate
            def bad(values: Any, q: float) -> float:
                return q

        assert "parameter 'q' of" in str(err.value)
        assert "needs a default value" in str(err.value)
        assert "UDM arguments beyond the data are optional keyword arguments" in str(err.value)

    def test_time_sensitive_needs_events_and_window(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            @aggregate(time_sensitive=True)
            def bad(events: Any) -> int:
                return 0

        assert "must take (events, window) as its first 2 parameter(s)" in str(err.value)
        assert "it takes ['events']" in str(err.value)

    def test_time_insensitive_needs_payloads(self) -> None:
        with pytest.raises(UdmDefinitionError, match=r"must take \(payloads\)"):

            @operator
            def bad() -> list[Any]:
                return []

    def test_unknown_property(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            @aggregate(foo=True)
            def bad(values: Any) -> int:
                return 0

        assert "unknown UDM properties ['foo']" in str(err.value)
        assert "known: ['deterministic', 'empty_preserving'" in str(err.value)

    def test_time_bound_on_decorated_aggregate(self) -> None:
        with pytest.raises(UdmDefinitionError, match="declares time_bound"):

            @aggregate(time_bound=True)
            def bad(values: Any) -> int:
                return 0

    def test_time_sensitive_operator_with_options(self) -> None:
        @operator(time_sensitive=True, time_bound=True, name="pattern")
        def detect(
            events: Sequence[IntervalEvent[Any]], window: WindowDescriptor, threshold: int = 3
        ) -> list[IntervalEvent[Any]]:
            return [e for e in events if e.payload > threshold]

        assert detect.name == "pattern"
        assert detect.flavor() == "time-sensitive non-incremental operator"
        assert detect.properties.time_bound is True
        assert detect.properties.output_within_window is True
        events = [IntervalEvent(0, 2, 5), IntervalEvent(1, 3, 2)]
        window = WindowDescriptor(0, 10)
        assert list(detect().compute_result(events, window)) == [IntervalEvent(0, 2, 5)]
        assert list(detect(threshold=1).compute_result(events, window)) == events

    def test_operator(self) -> None:
        @operator(deterministic=False)
        def top2(values: Sequence[int]) -> list[int]:
            return sorted(values, reverse=True)[:2]

        assert list(top2().compute_result([4, 9, 1])) == [9, 4]
        assert top2.flavor() == "time-insensitive non-incremental operator"
        assert top2.properties.deterministic is False
        assert top2.__doc__ is None

    def test_docstring_kept(self) -> None:
        @aggregate
        def documented(values: Any) -> int:
            """Counts."""
            return len(values)

        assert documented.__doc__ == "Counts."


class TestFunction:
    def test_udf(self) -> None:
        @function
        def fahrenheit(celsius: float) -> float:
            return celsius * 9 / 5 + 32

        assert isinstance(fahrenheit, Function)
        assert fahrenheit(100) == 212.0
        assert fahrenheit.name == "fahrenheit"
        assert fahrenheit.__name__ == "fahrenheit"
        assert fahrenheit.flavor() == "function"
        assert fahrenheit.kind == "function"
        assert repr(fahrenheit) == "<function UDF fahrenheit>"
        assert fahrenheit.properties.deterministic is True
        assert fahrenheit.properties.invertible is False

    def test_udf_options(self) -> None:
        @function(name="jitter", deterministic=False)
        def noisy(x: float) -> float:
            return x

        assert noisy.name == "jitter"
        assert noisy.properties.deterministic is False

    def test_not_callable(self) -> None:
        with pytest.raises(
            UdmDefinitionError, match=r"@function wraps a function \(def ...\), got int 5"
        ):
            function(5)  # type: ignore[call-overload]


class TestEventsModule:
    def test_infinity(self) -> None:
        assert INFINITY == 2**63 - 1

    def test_events_are_frozen(self) -> None:
        e = IntervalEvent(1, 2, "x")
        with pytest.raises(AttributeError):
            e.start = 5  # type: ignore[misc]

    def test_events_order_by_start_end_then_payload_value(self) -> None:
        E = IntervalEvent
        events = [E(0, 5, 100), E(0, 5, {"b": 1}), E(0, 3, "z"), E(0, 5, 27), E(-1, 9, {"a": 2})]
        assert sorted(events) == [
            E(-1, 9, {"a": 2}),
            E(0, 3, "z"),
            E(0, 5, 27),
            E(0, 5, 100),
            E(0, 5, {"b": 1}),
        ]
        assert E(0, 5, 27) < E(0, 5, 100) <= E(0, 5, 100) and E(1, 2, 0) > E(0, 9, 9)
        assert E(0, 5, 2) >= E(0, 5, 2)
        with pytest.raises(TypeError):
            _ = E(0, 5, 1) < (0, 5, 1)  # type: ignore[operator]


class TestDocstrings:
    @pytest.mark.parametrize("module", [udm.sdk.base, udm.sdk.decorators])
    def test_doctests_pass(self, module: Any) -> None:
        result = doctest.testmod(module)
        assert result.failed == 0
        assert result.attempted > 0

    def test_sdk_import_does_not_import_spark(self) -> None:
        code = "import sys, udm.sdk; print('pyspark' in sys.modules)"
        out = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        )
        assert out.stdout.strip() == "False"


class TestAddMany:
    """add_many: ``add`` in a loop unless a UDA overrides it; checked like
    any other method."""

    @pytest.mark.parametrize("base", [IncrementalAggregate, IncrementalOperator])
    def test_default_adds_in_order(self, base: type) -> None:
        cls = type(
            "Collect",
            (base,),
            {
                "initial_state": lambda self: [],
                "add": lambda self, s, v: [*s, v],
                "result": lambda self, s: s,
            },
        )
        udm = cls()
        assert udm.add_many([0], [3, 1, 2]) == [0, 3, 1, 2]
        assert udm.add_many([0], []) == [0]
        assert not cls.implements("add_many")

    def test_override_is_recognized(self) -> None:
        class Sum(IncrementalAggregate):
            def initial_state(self) -> int:
                return 0

            def add(self, state: int, value: int) -> int:
                return state + value

            def add_many(self, state: int, values: Sequence[int]) -> int:
                return state + sum(values)

            def result(self, state: int) -> int:
                return state

        assert Sum.implements("add_many") and Sum().add_many(1, [2, 3]) == 6

    def test_wrong_arity(self) -> None:
        with pytest.raises(UdmDefinitionError) as err:

            class Sum(IncrementalAggregate):
                def initial_state(self) -> int:
                    return 0

                def add(self, state: int, value: int) -> int:
                    return state + value

                def add_many(self, values: Sequence[int]) -> int:
                    return sum(values)

                def result(self, state: int) -> int:
                    return state

        assert "Sum.add_many takes 1 required argument(s) besides self, but a " in str(err.value)


def test_udms_defined_in_a_script_survive_cloudpickle_by_value() -> None:
    """Spark ships a UDM defined in a query file or a function by value:
    cloudpickle first creates an empty class and sets its methods after,
    which must not fail validation (checked in a fresh interpreter)."""
    cloudpickle = pytest.importorskip("pyspark.cloudpickle")

    def make() -> tuple[Any, Any]:
        @aggregate
        def biggest(values: list[float]) -> float:
            return max(values)

        class Count(IncrementalAggregate):
            def initial_state(self) -> int:
                return 0

            def add(self, state: int, value: Any) -> int:
                return state + 1

            def result(self, state: int) -> int:
                return state

        return biggest, Count

    code = (
        "import sys; from pyspark import cloudpickle; "
        "b, c = cloudpickle.loads(sys.stdin.buffer.read()); u = c(); "
        "print(b().compute_result([1, 5, 2]), u.result(u.add(u.add(u.initial_state(), 1), 2)),"
        " b.name, c.name, c.implements('add'), c.implements('remove'))"
    )
    got = subprocess.run(
        [sys.executable, "-c", code],
        input=cloudpickle.dumps(make()),
        capture_output=True,
        check=True,
    )
    assert got.stdout.decode().split() == ["5", "2", "biggest", "count", "True", "False"]
    # defined normally, a class missing a method still fails where it is defined
    with pytest.raises(UdmDefinitionError, match="does not implement initial_state"):

        class Broken(IncrementalAggregate):
            def add(self, state: int, value: Any) -> int:
                return state


class TestShapesCaughtAtDefinition:
    """Mistakes that used to pass definition and fail (or mislead) later."""

    def test_a_udm_derives_from_exactly_one_flavor(self) -> None:
        from udm.sdk.base import Udm

        with pytest.raises(UdmDefinitionError, match=r"exactly one UDM flavor .* from none"):

            class Bare(Udm):
                pass

        with pytest.raises(
            UdmDefinitionError, match=r"it derives from Aggregate, IncrementalOperator$"
        ):

            class Mixed(Aggregate, IncrementalOperator):
                def compute_result(self, payloads: Sequence[Any]) -> Any:
                    return 0

    @pytest.mark.parametrize("name", [42, "", "bad name!", "stats..median", ".x", "x:y"])
    def test_names_are_identifiers(self, name: Any) -> None:
        with pytest.raises(UdmDefinitionError, match=r"\.name is .*; a UDM name is an identifier"):
            type("Named", (Aggregate,), {"name": name, "compute_result": lambda s, p: 0})
        if isinstance(name, str):
            with pytest.raises(UdmDefinitionError, match="a UDM name is an identifier"):
                aggregate(name=name)(lambda payloads: 0)

    def test_dotted_names_are_for_in_process_udms(self) -> None:
        @aggregate(name="my.spread")
        def spread(payloads: Sequence[float]) -> float:
            return max(payloads) - min(payloads)

        assert spread.name == "my.spread"

    def test_a_lambda_needs_a_name(self) -> None:
        with pytest.raises(UdmDefinitionError, match=r"@aggregate on a lambda: .*name="):
            aggregate(lambda payloads: 0)
        assert aggregate(name="zero")(lambda payloads: 0).name == "zero"
        with pytest.raises(UdmDefinitionError, match=r"@function on a lambda"):
            function(lambda x: x)

    def test_async_and_generator_methods(self) -> None:
        with pytest.raises(UdmDefinitionError, match=r"\.compute_result is async"):

            class Later(Aggregate):
                async def compute_result(self, payloads: Sequence[Any]) -> Any:
                    return 0

        with pytest.raises(UdmDefinitionError, match=r"\.result is a generator .*return the"):

            class Yields(IncrementalAggregate):
                def initial_state(self) -> int:
                    return 0

                def add(self, state: int, payload: Any) -> int:
                    return state + 1

                def result(self, state: int) -> Any:
                    yield state

        class Outputs(Operator):  # an operator's compute_result may yield
            def compute_result(self, payloads: Sequence[Any]) -> Iterable[Any]:
                yield from payloads

        assert list(Outputs().compute_result([1, 2])) == [1, 2]

    def test_decorators_wrap_plain_functions(self) -> None:
        with pytest.raises(
            UdmDefinitionError, match=r"@aggregate wraps a function, but .*Total is a class"
        ):

            @aggregate
            class Total(Aggregate):
                def compute_result(self, payloads: Sequence[Any]) -> Any:
                    return 0

        with pytest.raises(UdmDefinitionError, match=r"@function wraps a function, but C is"):
            function(type("C", (), {}))
        with pytest.raises(UdmDefinitionError, match=r"@aggregate\('pct'\): pass the name as"):
            aggregate("pct")  # type: ignore[call-overload]
        with pytest.raises(UdmDefinitionError, match=r"@aggregate on .*gen: a generator"):

            @aggregate
            def gen(payloads: Sequence[Any]) -> Any:
                yield sum(payloads)

        with pytest.raises(UdmDefinitionError, match=r"@operator on .*later: an async function"):

            @operator
            async def later(payloads: Sequence[Any]) -> Any:
                return payloads

        @operator
        def each(payloads: Sequence[Any]) -> Iterable[Any]:
            yield from payloads

        assert list(each().compute_result([3])) == [3]

    def test_function_is_checked_like_the_other_decorators(self) -> None:
        """@function let an async function or a generator through (their
        coroutine or generator objects became payloads), stored
        deterministic="no" (truthy: declared deterministic) and took any name."""
        with pytest.raises(UdmDefinitionError, match=r"@function on .*plus: an async function"):

            @function
            async def plus(x: int) -> int:
                return x + 1

        with pytest.raises(UdmDefinitionError, match=r"@function on .*gen: a generator"):

            @function
            def gen(x: int) -> Any:
                yield x

        with pytest.raises(
            UdmDefinitionError,
            match=r"@function on .*ident declares deterministic='no'; properties are True or False",
        ):

            @function(deterministic="no")  # type: ignore[arg-type]
            def ident(x: int) -> int:
                return x

        with pytest.raises(
            UdmDefinitionError, match=r"name='bad name'; a UDF name is an identifier"
        ):

            @function(name="bad name")
            def named(x: int) -> int:
                return x

        @function(name="local.f", deterministic=False)
        def fine(x: int) -> int:
            return x

        assert fine.name == "local.f" and fine.properties.deterministic is False

    def test_invertible_and_mergeable_are_for_incremental_udms(self) -> None:
        class Helpers(Aggregate):
            def compute_result(self, payloads: Sequence[Any]) -> Any:
                return 0

            def remove(self, a: Any, b: Any) -> Any:  # helpers, not the incremental API
                return a

            def merge(self, a: Any, b: Any) -> Any:
                return a

        assert not Helpers.properties.invertible and not Helpers.properties.mergeable
        assert "invertible" not in Helpers.properties.enabled()
        with pytest.raises(UdmDefinitionError, match=r"invertible=True, which applies to incr"):

            class Says(Aggregate):
                properties = Properties(invertible=True)

                def compute_result(self, payloads: Sequence[Any]) -> Any:
                    return 0

    @pytest.mark.parametrize("prop", ["deterministic", "order_insensitive", "time_bound"])
    @pytest.mark.parametrize("value", ["yes", None, 1])
    def test_properties_are_booleans(self, prop: str, value: Any) -> None:
        with pytest.raises(UdmDefinitionError, match=rf"declares {prop}={value!r}; properties"):
            type(
                "Flagged",
                (Operator,),
                {
                    "properties": Properties(**{prop: value}),
                    "compute_result": lambda self, p: p,
                },
            )
