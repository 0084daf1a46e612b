"""A quiet local SparkSession for the CLI, the demo and the benchmarks."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

__all__ = ["LOCAL_CONF", "local_session", "share_driver_python"]

LOCAL_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
    "spark.driver.extraJavaOptions": "-Dlog4j2.level=ERROR",
}


def share_driver_python(spark: SparkSession) -> None:
    """Let a local session's Python workers run this interpreter and
    import what this process imports, unless the user chose otherwise.

    PySpark starts workers with ``PYSPARK_PYTHON``, else ``python3`` from
    ``PATH``: in a virtualenv that is not activated, that interpreter lacks
    udm and the UDM libraries ("No module named 'udm'" in the worker). And
    a UDM defined in a module the driver imports from a directory of its
    own (a script's folder, a test directory) is pickled by reference, so
    the worker must find that module too. On a local master the workers
    run on this machine, so the driver's interpreter and its code
    directories (``sys.path`` entries outside the interpreter's own
    prefixes) are the right ones. A chosen ``PYSPARK_PYTHON`` or
    ``spark.pyspark.python`` is kept, paths are only ever added to the
    workers' ``PYTHONPATH``, and a cluster master is left alone. PySpark
    reads both when a Python function is wrapped, so this applies to the
    functions udm creates after it.
    """
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect: the server runs the workers
        return
    if not (sc.master or "").startswith("local"):
        return
    if (
        not os.environ.get("PYSPARK_PYTHON")
        and not sc.getConf().get("spark.pyspark.python")
        and sc.pythonExec == "python3"
    ):
        sc.pythonExec = sys.executable
    prefixes = {
        os.path.realpath(p)
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    }
    have = [p for p in sc.environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    code = [
        path
        for entry in sys.path
        if os.path.isdir(path := os.path.realpath(entry or os.getcwd()))
        and not any(os.path.commonpath([path, prefix]) == prefix for prefix in prefixes)
    ]
    merged = list(dict.fromkeys([*have, *code]))
    if merged != have:
        sc.environment["PYTHONPATH"] = os.pathsep.join(merged)


def local_session(
    app_name: str, master: str = "local[2]", conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A local session (``LOCAL_CONF`` updated by ``conf``) whose Python
    workers run this interpreter, so they import udm and the installed UDM
    libraries; Spark's own logging is cut to errors."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for name, value in {**LOCAL_CONF, **(conf or {})}.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
