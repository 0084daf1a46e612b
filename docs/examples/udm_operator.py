from udm.host import Cht, TumblingWindow, evaluate
from udm.sdk import Operator


class TopTwo(Operator):
    """Zero or more payloads out: each becomes an event with the window's lifetime."""

    def compute_result(self, payloads):
        return sorted(payloads, reverse=True)[:2]


cht = Cht([(0, 1, 3), (1, 2, 9), (2, 3, 5), (6, 7, 1)])
assert evaluate(cht, TumblingWindow(5), TopTwo) == Cht([(0, 5, 9), (0, 5, 5), (5, 10, 1)])
