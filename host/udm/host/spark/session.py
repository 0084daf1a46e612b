"""SparkSessions for the CLI, the demo and the benchmarks: local, on a
cluster, through Spark Connect, or the one already running.

Where the master comes from, first found wins: an explicit ``master`` or
``remote`` argument (``--master``/``--remote``); an active session;
``spark-submit``'s (``--master``, else its default); ``SPARK_REMOTE``;
``SPARK_MASTER``; a master Spark itself will pick up (``PYSPARK_SUBMIT_ARGS``,
``MASTER``, ``spark.master`` in ``spark-defaults.conf``); else ``local[2]``. Only a
local master gets the local settings (:data:`LOCAL_CONF`, this
interpreter for the Python workers); under Spark Connect nothing touches
``sparkContext``, which does not exist there.
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
import weakref
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from udm.host.spark.jvmnoise import filtered_stderr

__all__ = [
    "LOCAL_CONF",
    "SHORT_LIVED_JAVA_OPTIONS",
    "UDM_CONF",
    "SessionError",
    "configured_master",
    "driver_conf",
    "is_connect",
    "is_local_master",
    "local_session",
    "session",
    "share_driver_python",
    "task_slots",
]

#: settings every session udm creates gets (a user's ``conf`` wins): times
#: are written and shown in UTC, Arrow carries rows to Python workers, and
#: no progress bar is drawn over the tools' own output
UDM_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}

#: what a Spark Connect session gets of :data:`UDM_CONF`: the progress bar
#: is the server's static setting (setting it only prints a warning)
CONNECT_CONF: dict[str, str] = {
    k: v for k, v in UDM_CONF.items() if k != "spark.ui.showConsoleProgress"
}

#: settings for a local master only (a cluster's are its operator's)
LOCAL_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    **UDM_CONF,
    "spark.python.worker.reuse": "true",
}

#: udm's log4j2 configuration for the drivers it starts: errors only, so no
#: start-up WARN/INFO lines reach the user's terminal (see the file)
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def driver_conf() -> dict[str, str]:
    """Settings for a classic driver JVM udm starts itself (any master; not
    under Connect, whose driver is the server): udm's quiet logging.

    >>> driver_conf()["spark.driver.extraJavaOptions"].startswith("-Dlog4j2.configurationFile=")
    True
    """
    location = shlex.quote(LOG4J_CONFIG.resolve().as_uri())
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={location}"}


DEFAULT_MASTER = "local[2]"


class SessionError(ValueError):
    """A session that cannot be made as asked; the message says why and what to do."""


def is_local_master(master: str | None) -> bool:
    """Whether ``master`` runs everything in this process's JVM
    (``local``, ``local[4]``, ``local[*, 2]``); ``local-cluster[...]``
    starts separate executors and counts as a cluster."""
    return master is not None and (master == "local" or master.startswith("local["))


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (no ``sparkContext``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _defaults_master() -> str | None:
    """``spark.master`` of the ``spark-defaults.conf`` Spark would read."""
    folder = os.environ.get("SPARK_CONF_DIR")
    if not folder and os.environ.get("SPARK_HOME"):
        folder = str(Path(os.environ["SPARK_HOME"]) / "conf")
    if not folder:
        return None
    path = Path(folder) / "spark-defaults.conf"
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.strip().replace("=", " ", 1).split(None, 1)
        if len(parts) == 2 and parts[0] == "spark.master":
            return parts[1].strip()
    return None


def configured_master() -> tuple[str, str] | None:
    """The master (or ``sc://`` remote) the environment configures, and
    where it comes from, or None when nothing does.

    ``spark-submit`` starts Python with ``PYSPARK_GATEWAY_PORT`` set and
    its own ``--master`` in the JVM's properties: then the master is
    ``"(spark-submit)"``, left for Spark to apply.
    """
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # the command line wins
        return "(spark-submit)", "spark-submit"
    if os.environ.get("SPARK_REMOTE"):
        return os.environ["SPARK_REMOTE"], "SPARK_REMOTE"
    if os.environ.get("SPARK_MASTER"):
        return os.environ["SPARK_MASTER"], "SPARK_MASTER"
    submit = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for i, arg in enumerate(submit):
        if arg == "--master" and i + 1 < len(submit):
            return submit[i + 1], "PYSPARK_SUBMIT_ARGS"
        if arg.startswith("--master="):
            return arg.split("=", 1)[1], "PYSPARK_SUBMIT_ARGS"
    if os.environ.get("MASTER"):
        return os.environ["MASTER"], "MASTER"
    found = _defaults_master()
    if found:
        return found, "spark-defaults.conf"
    return None


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
    if is_connect(spark):  # the server runs the workers
        return
    try:
        sc = spark.sparkContext
    except Exception:
        return
    if not is_local_master(sc.master or ""):
        return
    if (
        sc.pythonExec == "python3"  # first: the rest reads the JVM's conf (py4j round trips)
        and not os.environ.get("PYSPARK_PYTHON")
        and not sc.getConf().get("spark.pyspark.python")
    ):
        sc.pythonExec = sys.executable
    have = [p for p in sc.environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    merged = list(dict.fromkeys([*have, *_code_dirs(tuple(sys.path), os.getcwd())]))
    if merged != have:
        sc.environment["PYTHONPATH"] = os.pathsep.join(merged)


#: per SparkContext, its default parallelism, 0 under dynamic allocation
#: (read once: a few py4j round trips)
_SLOTS: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()


def task_slots(spark: SparkSession) -> int | None:
    """How many tasks a classic session runs at once (Spark's default
    parallelism: the cores of a local master, of the executors on a
    cluster), read once per context; None when that is not known for the
    whole job: under Spark Connect, where no ``sparkContext`` exists, and
    with dynamic allocation, where the executors running when a query is
    planned may be a few of those that will run it. A stage with fewer,
    larger tasks than this leaves cores idle; one with more runs in waves."""
    if is_connect(spark):
        return None
    try:
        sc = spark.sparkContext
    except Exception:
        return None
    if sc not in _SLOTS:
        dynamic = sc.getConf().get("spark.dynamicAllocation.enabled", "false")
        _SLOTS[sc] = 0 if dynamic.strip().lower() == "true" else max(1, int(sc.defaultParallelism))
    return _SLOTS[sc] or None


@functools.lru_cache(maxsize=8)
def _code_dirs(path: tuple[str, ...], cwd: str) -> list[str]:
    """The directories of ``sys.path`` (``path``, as of working directory
    ``cwd``) outside the interpreter's own prefixes, resolved: made once
    per ``sys.path`` (resolving every entry took about 1 ms, and every
    Python step planned asks)."""
    prefixes = {
        os.path.realpath(p)
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    }
    return [
        resolved
        for entry in path
        if os.path.isdir(resolved := os.path.realpath(entry or cwd))
        and not any(os.path.commonpath([resolved, prefix]) == prefix for prefix in prefixes)
    ]


def _quiet(spark: SparkSession, level: str) -> None:
    """Cut Spark's own logging to ``level`` (classic sessions only: under
    Connect the server's logging is its operator's)."""
    if not is_connect(spark):
        spark.sparkContext.setLogLevel(level)


#: driver JVM options of a short-lived classic session (``short_lived=True``,
#: what ``udm-cli run`` starts): the client compiler only. C2's optimizing
#: compilation costs more CPU than it saves in a run of a minute or so
#: (``make demo``: docs/performance.md, "The demo"); it goes in Spark's
#: ``spark.driver.defaultJavaOptions``, so ``extraJavaOptions`` add to it
#: and ``--conf spark.driver.defaultJavaOptions=`` removes it
SHORT_LIVED_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def session(
    app_name: str,
    master: str | None = None,
    remote: str | None = None,
    conf: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
    short_lived: bool = False,
) -> SparkSession:
    """The session a udm tool should use (see the module docstring for
    the order), with ``conf`` applied; ``short_lived``: a new classic
    driver JVM gets :data:`SHORT_LIVED_JAVA_OPTIONS`.

    An explicit ``master`` of ``sc://...`` is taken as ``remote``. Asking
    for a master other than that of the session already running in this
    process is an error: Spark has one session's context per process.
    """
    if master is not None and remote is not None:
        raise SessionError("give a master or a Spark Connect remote (sc://...), not both")
    if master is not None and master.startswith("sc://"):
        master, remote = None, master
    if remote is not None and not remote.startswith("sc://"):
        raise SessionError(f"remote {remote!r}: a Spark Connect URL starts with sc://")
    conf = dict(conf or {})
    active = SparkSession.getActiveSession()
    if active is not None:
        _check_active(active, master, remote)
        for name, value in conf.items():
            try:
                active.conf.set(name, value)
            except Exception as exc:  # a static setting (spark.executor.memory)
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise SessionError(
                    f"{name}={value} cannot be applied to the session already running in "
                    f"this process: {first}"
                ) from None
        return active
    found = None
    if master is None and remote is None:
        found = configured_master()
        if found is not None and found[0].startswith("sc://"):
            remote = found[0]
        elif found is None:
            master = DEFAULT_MASTER
        elif found[1] == "SPARK_MASTER":
            master = found[0]
        # else: Spark applies spark-submit's, MASTER or spark-defaults.conf
    if remote is not None:
        builder = SparkSession.builder.remote(remote)
        settings = {**CONNECT_CONF, **conf}
    else:
        # an explicit classic master: SPARK_REMOTE would turn the builder
        # into a Connect client
        os.environ.pop("SPARK_REMOTE", None)
        builder = SparkSession.builder.appName(app_name)
        if master is not None:
            builder = builder.master(master)
        # a local master Spark picks up itself (PYSPARK_SUBMIT_ARGS, MASTER,
        # spark-defaults.conf) gets the local settings too
        local = is_local_master(master if master is not None else found and found[0])
        if local:
            # the workers run here: this interpreter, which has udm
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        settings = {**(LOCAL_CONF if local else UDM_CONF), **driver_conf(), **conf}
        if short_lived:
            settings.setdefault("spark.driver.defaultJavaOptions", SHORT_LIVED_JAVA_OPTIONS)
    for name, value in settings.items():
        builder = builder.config(name, value)
    if remote is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        # this call may start the driver JVM (not under spark-submit, whose
        # JVM runs already): keep the Java runtime's start-up notice out
        with filtered_stderr():
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    _quiet(spark, log_level)
    share_driver_python(spark)
    return spark


def _check_active(active: SparkSession, master: str | None, remote: str | None) -> None:
    """Refuse a master or remote the running session does not have."""
    if is_connect(active):
        if master is not None:
            raise SessionError(
                f"a Spark Connect session is already running in this process; "
                f"master {master!r} cannot be used alongside it"
            )
        return
    running = active.sparkContext.master
    if remote is not None:
        raise SessionError(
            f"a Spark session on {running} is already running in this process; "
            f"remote {remote!r} cannot be used alongside it"
        )
    if master is not None and master != running:
        raise SessionError(
            f"a Spark session on {running} is already running in this process; "
            f"master {master!r} cannot be used alongside it (stop it first)"
        )


def local_session(
    app_name: str, master: str = DEFAULT_MASTER, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A session on ``master`` (local by default: ``LOCAL_CONF`` updated
    by ``conf``, Python workers running this interpreter so they import
    udm and the installed UDM libraries); Spark's own logging is cut to
    errors. Kept for scripts and tests that want a local session whatever
    the environment says; :func:`session` honours the environment."""
    os.environ.pop("SPARK_REMOTE", None)
    return session(app_name, master=master, conf=conf)
