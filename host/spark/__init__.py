"""udm on Apache Spark: batch queries over event tables, SQL table functions.

Importing this package imports pyspark; ``udm.host`` itself never does.
Most users reach it through :class:`udm.host.query.Stream`
(``to_dataframe()``); :func:`register_sql` makes UDMs callable from SQL.
"""
