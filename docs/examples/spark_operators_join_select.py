"""A join's select=: the output payload built from both payloads, the same
on every engine (Spark batch included)."""

from typing import TypedDict

from pyspark.sql import SparkSession

from udm.host import Cht, IntervalEvent
from udm.host.query import Stream

spark = SparkSession.builder.getOrCreate()

orders = Stream.from_cht(
    [(0, 10, {"shop": "a", "amount": 30}), (4, 8, {"shop": "b", "amount": 5})], key="shop"
)
prices = Stream.from_cht(
    [(2, 6, {"shop": "a", "rate": 2}), (6, 12, {"shop": "a", "rate": 3})], key="shop"
)


class Charge(TypedDict):  # the output columns, declared (streaming needs them declared)
    cost: int


def charge(order: dict, price: dict) -> Charge:
    return {"cost": order["amount"] * price["rate"]}


charged = orders.join(prices, select=charge)

# the order [0, 10) meets the rate 2 over [2, 6) and the rate 3 over [6, 10);
# the key column comes first, then the select's columns
expected = {
    "a": Cht(
        [
            IntervalEvent(2, 6, {"shop": "a", "cost": 60}),
            IntervalEvent(6, 10, {"shop": "a", "cost": 90}),
        ]
    )
}
for engine in ("reference", "host", "spark"):
    assert charged.to_cht(engine=engine) == expected
print(charged.to_cht(engine="spark"))
