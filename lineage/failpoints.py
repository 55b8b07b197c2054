"""Named crash points, armed by an environment variable, for fault tests.

``LINEAGE_FAILPOINT=push.after-start`` makes the process SIGKILL itself when it
reaches that point; ``LINEAGE_FAILPOINT=push.after-start:raise`` raises
:class:`FailpointError` instead, and ``...:sleep`` pauses there for a minute
(for a test to send a signal; ``:sleep=5`` for five seconds). Unarmed, a failpoint costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import time

ENV = "LINEAGE_FAILPOINT"


class FailpointError(RuntimeError):
    """Raised by a failpoint armed with ':raise'."""


def armed(environ: dict[str, str] | None = None) -> tuple[str, str] | None:
    spec = (environ if environ is not None else os.environ).get(ENV, "")
    if not spec:
        return None
    name, _, action = spec.partition(":")
    return name, action or "kill"


def failpoint(name: str, environ: dict[str, str] | None = None) -> None:
    spec = armed(environ)
    if spec is None or spec[0] != name:
        return
    if spec[1] == "raise":
        raise FailpointError(f"failpoint {name}")
    if spec[1] == "sleep" or spec[1].startswith("sleep="):
        time.sleep(float(spec[1].partition("=")[2] or 60))
        return
    os.kill(os.getpid(), signal.SIGKILL)
