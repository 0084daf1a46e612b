"""Physical operators of the incremental engine (CEDR's algorithms).

One module per kind of operator: :mod:`~udm.host.operators.base` (the
push-based graph), :mod:`~udm.host.operators.relational` (where, select,
union), :mod:`~udm.host.operators.lifetime` (AlterLifetime),
:mod:`~udm.host.operators.join` (equijoin, anti-semijoin),
:mod:`~udm.host.operators.window` (UDMs over windows, the incremental
host) and :mod:`~udm.host.operators.consistency` (Align, Finalize).
:class:`udm.host.engines.graph.HostEngine` compiles plans into them.
"""

from udm.host.operators.base import Collector, Operator
from udm.host.operators.consistency import AlignOperator, FinalizeOperator
from udm.host.operators.join import AntiJoinOperator, JoinOperator
from udm.host.operators.lifetime import AlterLifetimeOperator
from udm.host.operators.relational import ProjectOperator, SelectOperator, UnionOperator
from udm.host.operators.window import WindowOperator

__all__ = [
    "AlignOperator",
    "AlterLifetimeOperator",
    "AntiJoinOperator",
    "Collector",
    "FinalizeOperator",
    "JoinOperator",
    "Operator",
    "ProjectOperator",
    "SelectOperator",
    "UnionOperator",
    "WindowOperator",
]
