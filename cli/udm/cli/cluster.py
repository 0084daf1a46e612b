"""Where ``udm-cli run``/``explain`` run their queries: the Spark options
(``--master``, ``--remote``, ``--conf``, ``--py-files``, ``--no-ship``),
the session they make, and the code shipped to the executors.

Shipping is automatic and reported: on a cluster master or through Spark
Connect, the query file's folder (its Python code) and the module of
every UDM a query resolves by name are zipped and added to the session,
so the executors import what the driver imported. A local master needs
none of it (its workers share the driver's paths and interpreter).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = [
    "ConfOption",
    "MasterOption",
    "PyFilesOption",
    "RemoteOption",
    "ShipOption",
    "SparkOptions",
    "SparkOptionsError",
    "is_stream",
    "ship_folder",
    "ship_libraries",
    "spark_options",
    "start_session",
]

MasterOption = Annotated[
    str | None,
    typer.Option(
        "--master",
        help="Spark master for a new session: local[N], spark://HOST:PORT, yarn, k8s://... "
        "(default: SPARK_REMOTE, SPARK_MASTER, spark-submit's, else local[2]).",
    ),
]
RemoteOption = Annotated[
    str | None,
    typer.Option(
        "--remote", help="A Spark Connect server, sc://HOST:PORT (default: SPARK_REMOTE)."
    ),
]
ConfOption = Annotated[
    list[str] | None,
    typer.Option(
        "--conf",
        metavar="KEY=VALUE",
        help="A Spark setting KEY=VALUE for the session (repeatable).",
    ),
]
PyFilesOption = Annotated[
    list[str] | None,
    typer.Option(
        "--py-files",
        metavar="FILES",
        help=".py, .zip or .egg files the executors import, comma-separated (repeatable).",
    ),
]
ShipOption = Annotated[
    bool,
    typer.Option(
        "--ship/--no-ship",
        help="Ship the query file's folder and the UDM libraries used by name to a "
        "cluster's executors (--no-ship: the cluster has them installed).",
    ),
]


class SparkOptionsError(ValueError):
    """Spark options that cannot be used; the message names the option."""


@dataclass
class SparkOptions:
    """The Spark options of one ``run``/``explain`` command."""

    master: str | None = None
    remote: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    py_files: list[Path] = field(default_factory=list)
    ship: bool = True
    #: what went to the executors so far (a udm.host.spark.shipping.Shipment)
    shipped: Any = None


def spark_options(
    master: str | None,
    remote: str | None,
    conf: list[str] | None,
    py_files: list[str] | None,
    ship: bool,
) -> SparkOptions:
    """Checked options, every problem reported at once, before Spark starts."""
    problems: list[str] = []
    if master is not None and remote is not None:
        problems.append("--master and --remote: give one of them (--remote is Spark Connect)")
    if remote is not None and not remote.startswith("sc://"):
        problems.append(f"--remote {remote}: a Spark Connect URL starts with sc://")
    if master is not None and not master.strip():
        problems.append("--master: empty; give a master URL such as local[2] or spark://HOST:7077")
    settings: dict[str, str] = {}
    for item in conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(f"--conf {item}: write KEY=VALUE, e.g. spark.executor.memory=2g")
        elif key.strip() in ("spark.master", "spark.remote"):
            flag = "--master" if key.strip() == "spark.master" else "--remote"
            problems.append(f"--conf {item}: use {flag} for it")
        else:
            settings[key.strip()] = value
    files: list[Path] = []
    for item in py_files or []:
        for part in filter(None, (p.strip() for p in item.split(","))):
            path = Path(part)
            if not path.is_file():
                problems.append(f"--py-files {part}: no such file")
            elif path.suffix not in (".py", ".zip", ".egg"):
                problems.append(f"--py-files {part}: use .py, .zip or .egg files")
            else:
                files.append(path.resolve())
    if problems:
        raise SparkOptionsError("\n".join(problems))
    return SparkOptions(master, remote, settings, files, ship)


def is_stream(query: Any) -> bool:
    """Whether a query is a udm Stream (else a DataFrame). Not by
    ``hasattr``: a Spark Connect DataFrame answers any attribute name with
    a column of that name."""
    from udm.host.query import Stream

    return isinstance(query, Stream)


def start_session(app_name: str, options: SparkOptions) -> Any:
    """The session for ``options`` (see :func:`udm.host.spark.session.session`
    for the order of master sources), with ``--py-files`` added; a new
    driver JVM is short-lived (the client compiler only: a CLI run is
    over in a minute or so)."""
    from udm.host.spark.session import session
    from udm.host.spark.shipping import add_py_files

    spark = session(
        app_name,
        options.master,
        options.remote,
        options.conf,
        log_level="FATAL",
        short_lived=True,
    )
    add_py_files(spark, options.py_files)
    return spark


def needs_shipping(spark: Any, options: SparkOptions) -> bool:
    """Whether code must be sent to the executors: a cluster master or a
    Spark Connect server, unless the user said it has the code."""
    from udm.host.spark.session import is_connect, is_local_master

    if not options.ship:
        return False
    return is_connect(spark) or not is_local_master(spark.sparkContext.master)


def ship_folder(spark: Any, query_file: Path, options: SparkOptions) -> Any:
    """Ship the Python code of the query file's folder (before the query
    file runs, which may start Spark jobs). Returns the Shipment."""
    from udm.host.spark.shipping import Shipment
    from udm.host.spark.shipping import ship_folder as ship

    if not needs_shipping(spark, options):
        return Shipment()
    return ship(spark, query_file.parent.resolve())


def ship_libraries(spark: Any, query_file: Path, options: SparkOptions) -> Any:
    """Ship the modules of the UDMs the queries resolved by name (once
    the query file has built its queries). Returns the Shipment."""
    from udm.host.registry import get_registry
    from udm.host.spark.shipping import Shipment, ship_modules

    if not needs_shipping(spark, options):
        return Shipment()
    modules = get_registry().resolved_modules()
    return ship_modules(spark, modules, exclude=[query_file.parent.resolve()])


def describe(shipment: Any, query_file: Path) -> list[str]:
    """Lines saying what went to the executors and what did not."""
    lines: list[str] = []
    if shipment.modules:
        lines.append(
            f"shipped to the executors: {', '.join(shipment.modules)} "
            f"(the code of {query_file.parent}/ and the UDM libraries used by name)"
        )
    lines += [  # what the user must install on the cluster themselves
        f"not shipped: {module} {why}"
        for module, why in shipment.skipped.items()
        if "install it on the cluster" in why
    ]
    return lines
