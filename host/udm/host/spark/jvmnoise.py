"""Keep the Java runtime's own start-up notice out of the user's terminal.

Spark's launcher always starts the driver JVM with
``--add-modules=jdk.incubator.vector``, and the Java runtime then prints
``WARNING: Using incubator modules: jdk.incubator.vector`` on stderr before
any logging configuration applies; no JVM or Spark option turns it off.
:func:`filtered_stderr` gives a JVM started inside its ``with`` block a
stderr that is a pipe, forwarded line by line to the real stderr by a
daemon thread that drops only the lines in :data:`NOISE`. Everything else
the JVM writes (errors, a user's own log configuration) still reaches the
terminal, for as long as the JVM runs.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["NOISE", "filtered_stderr", "forward"]

#: prefixes of stderr lines the JVM prints that no udm user can act on
NOISE: tuple[bytes, ...] = (b"WARNING: Using incubator modules:",)


def forward(source: int, target: int, noise: tuple[bytes, ...] = NOISE) -> None:
    """Copy lines from file descriptor ``source`` to ``target`` until end of
    file, dropping lines that start with one of ``noise``; closes ``source``.

    >>> import os
    >>> r, w = os.pipe()
    >>> out_r, out_w = os.pipe()
    >>> _ = os.write(w, b"WARNING: Using incubator modules: x\\nkept\\n")
    >>> os.close(w)
    >>> forward(r, out_w)
    >>> os.close(out_w)
    >>> os.read(out_r, 100)
    b'kept\\n'
    """
    with os.fdopen(source, "rb", buffering=0) as lines:
        for line in iter(lines.readline, b""):
            if not line.startswith(noise):
                os.write(target, line)


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
    """Within the block, file descriptor 2 is a pipe filtered by
    :func:`forward` into the real stderr; processes started in the block
    keep that pipe after it ends. Without a usable fd 2 it does nothing."""
    try:
        real = os.dup(2)
    except OSError:
        yield
        return
    read_end, write_end = os.pipe()
    pump = threading.Thread(
        target=forward, args=(read_end, real), name="udm-jvm-stderr", daemon=True
    )
    pump.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        # the pipe's last writers are now the processes started in the
        # block; the pump ends when they do
        os.dup2(real, 2)
