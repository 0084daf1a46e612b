"""udm-cli entry point (typer).

Exit codes: 0 success; 1 a command failed (unknown UDM, failing fixtures or
tests, an invalid fixture or query file, a query that failed on Spark,
libraries that could not be loaded with ``list --strict``, a directory that
already exists); 2 bad usage (typer's own code for wrong options).
"""

from __future__ import annotations

# the commands register on the app as they are imported, and --help lists
# them in that order: what is installed, testing, a new library, Spark
# isort: off
from udm.cli import catalog
from udm.cli import testing
from udm.cli import scaffold
from udm.cli import queries

# isort: on
from udm.cli.app import app, template_dir
from udm.cli.queries import spark_message

__all__ = ["app", "catalog", "queries", "scaffold", "spark_message", "template_dir", "testing"]
