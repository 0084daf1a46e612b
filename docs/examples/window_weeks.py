from datetime import UTC, datetime, timedelta

from udm.host import Cht, TumblingWindow, evaluate, from_ticks, to_ticks
from udm.sdk import aggregate


@aggregate
def count(values):
    return len(values)


monday = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)  # a Monday morning
cht = Cht([(to_ticks(monday), to_ticks(monday) + 1, "order")])


def week_start(window):
    (event,) = evaluate(cht, window, count)
    return from_ticks(event.start).strftime("%A %Y-%m-%d")


# The grid starts at the Unix epoch, a Thursday: weeks run Thursday to Thursday.
assert week_start(TumblingWindow(timedelta(days=7))) == "Thursday 2026-11-19"

# Four days later gives Monday weeks (StreamInsight's, anchored at 0001-01-01).
week = TumblingWindow(timedelta(days=7), offset=timedelta(days=4))
assert week_start(week) == "Monday 2026-11-23"
