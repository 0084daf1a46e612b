from udm.host import INFINITY, Cht, Insert, Retract, derive_cht

# Table 2 of the paper: one physical stream (ids, inserts and retractions).
table2 = [
    Insert("E0", 1, INFINITY, "P1"),  # E0 starts at 1; its end is not known yet
    Retract("E0", 1, INFINITY, 10),  # E0 ends at 10 ...
    Retract("E0", 1, 10, 5),  # ... no, at 5
    Insert("E1", 4, 9, "P2"),
]
# Sync time: the earliest time an element modifies.
assert [e.sync_time for e in table2] == [1, 10, 5, 4]

# Table 1 of the paper: its canonical history table.
cht, _ = derive_cht(table2)
assert cht == Cht([(1, 5, "P1"), (4, 9, "P2")])

# A different physical stream (other ids, other order, no retractions): same CHT.
other = [Insert("b", 4, 9, "P2"), Insert("a", 1, 5, "P1")]
assert derive_cht(other)[0] == cht

# A full retraction (new end = start) deletes an event.
deleted = [*table2, Retract("E1", 4, 9, 4)]
assert derive_cht(deleted)[0] == Cht([(1, 5, "P1")])
