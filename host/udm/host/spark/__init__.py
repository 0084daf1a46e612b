"""udm on Apache Spark: batch queries over event tables, SQL table functions,
physical-stream replay.

Importing this package imports pyspark; ``udm.host`` itself never does.
Most users reach it through :class:`udm.host.query.Stream`
(``to_dataframe()``); :func:`register_sql` makes UDMs callable from SQL and
:func:`replay` runs physical streams through the incremental host per key.
"""

from udm.host.spark.replay import replay
from udm.host.spark.sql import OPTIONS, register_sql

__all__ = ["OPTIONS", "register_sql", "replay"]
