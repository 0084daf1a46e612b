from udm.host import Cht, Cti, CtiViolationError, Insert, Retract, derive_cht

stream = [
    Insert("a", 0, 10, "a"),
    Cti(5),  # no later element may modify time before 5
    Insert("b", 2, 4, "b"),  # lies entirely before the CTI
    Insert("c", 3, 8, "c"),  # starts before the CTI but ends after it
    Retract("a", 0, 10, 3),  # would move a's end to 3, before the CTI
]

# raise (the default): the first violating element is rejected, with its position.
try:
    derive_cht(stream)
except CtiViolationError as exc:
    assert exc.position == 2 and exc.element == Insert("b", 2, 4, "b")
    assert "before the latest CTI 5" in str(exc)
else:
    raise AssertionError("expected CtiViolationError")

# drop: every violating element is discarded and counted.
cht, stats = derive_cht(stream, cti_policy="drop")
assert cht == Cht([(0, 10, "a")])
assert (stats.dropped_inserts, stats.dropped_retractions) == (2, 1)

# adjust: keep what lies after the CTI, drop the rest.
cht, stats = derive_cht(stream, cti_policy="adjust")
assert cht == Cht([(0, 5, "a"), (5, 8, "c")])  # a now ends at the CTI, c starts at it
assert (stats.dropped_inserts, stats.adjusted_inserts, stats.adjusted_retractions) == (1, 1, 1)

# The producer believes its late retraction happened: the next one quotes the
# end it asked for (3) and is judged by what it changes here.
late = [Insert("a", 0, 10, "a"), Cti(5), Retract("a", 0, 10, 3), Retract("a", 0, 3, 2)]
cht, stats = derive_cht(late, cti_policy="drop")  # a keeps [0, 10): both are late
assert cht == Cht([(0, 10, "a")]) and stats.dropped_retractions == 2
cht, stats = derive_cht(late, cti_policy="adjust")  # a ends at the CTI; the second changes nothing
assert cht == Cht([(0, 5, "a")])
assert (stats.adjusted_retractions, stats.dropped_retractions) == (1, 1)

# A late retraction of an event the CTI passed, quoting a lifetime the event
# does not have, is late too (engines may have forgotten the event): the
# policy applies, on every engine and whether or not the event is forgotten.
passed = [Insert("p", 1, 2, "p"), Cti(5), Retract("p", 0, 9, 3)]  # p is [1, 2)
try:
    derive_cht(passed)
except CtiViolationError as exc:
    assert "sync time 3 is before the latest CTI 5" in str(exc)
else:
    raise AssertionError("expected CtiViolationError")
cht, stats = derive_cht(passed, cti_policy="drop")
assert cht == Cht([(1, 2, "p")]) and stats.dropped_retractions == 1
