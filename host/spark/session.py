"""A quiet local SparkSession for the CLI, the demo and the benchmarks."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

__all__ = ["LOCAL_CONF", "local_session"]

LOCAL_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
    "spark.driver.extraJavaOptions": "-Dlog4j2.level=ERROR",
}


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
