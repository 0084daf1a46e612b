from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import Aggregate


class MyAverage(Aggregate):
    """The paper's MyAverage: a relational view, payloads in, one value out."""

    def compute_result(self, payloads):
        return sum(payloads) / len(payloads)


cht = Cht([(0, 3, 1.0), (2, 4, 4.0), (6, 7, 10.0)])
assert evaluate(cht, TumblingWindow(5), MyAverage) == Cht([(0, 5, 2.5), (5, 10, 10.0)])
