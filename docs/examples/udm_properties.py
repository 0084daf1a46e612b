from udm.sdk import (
    Aggregate,
    IncrementalAggregate,
    Properties,
    TimeSensitiveAggregate,
    UdmDefinitionError,
    aggregate,
    operator,
)


class Sum(IncrementalAggregate):
    properties = Properties(order_insensitive=True)

    def initial_state(self):
        return 0

    def add(self, state, payload):
        return state + payload

    def remove(self, state, payload):
        return state - payload

    def result(self, state):
        return state


# None means "derive from the class": remove() makes it invertible; no merge(), not mergeable.
assert Sum.properties.invertible is True and Sum.properties.mergeable is False
assert Sum.properties.enabled() == [
    "deterministic",
    "invertible",
    "empty_preserving",
    "order_insensitive",
]


@operator(time_sensitive=True, time_bound=True)
def echo(events, window):
    return list(events)


assert echo.properties.time_bound and echo.properties.output_within_window


def definition_error(define):
    """Run a class definition and return the UdmDefinitionError it raises."""
    try:
        define()
    except UdmDefinitionError as exc:
        return str(exc)
    raise AssertionError("expected UdmDefinitionError")


def claims_mergeable():
    class BadSum(Sum):
        properties = Properties(mergeable=True)


def misnamed():
    class Median(Aggregate):
        def compute(self, payloads):
            return sorted(payloads)[len(payloads) // 2]


def wrong_arity():
    class Twa(TimeSensitiveAggregate):
        def compute_result(self, events):
            return 0.0


def aggregate_time_bound():
    @aggregate(time_bound=True)
    def total(values):
        return sum(values)


assert "declares mergeable=True but has no merge()" in definition_error(claims_mergeable)
assert "does not implement compute_result()" in definition_error(misnamed)
assert "calls it with 2" in definition_error(wrong_arity)
assert "only applies to time-sensitive operators" in definition_error(aggregate_time_bound)
