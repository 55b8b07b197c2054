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
from collections.abc import Callable

ENV = "LINEAGE_FAILPOINT"

# Every point the code names, in the order a run meets them. Commits add
# "<step>.before-commit" and "<step>.after-commit" for each operation
# (segment_lineage.lineage.manager.commit_step): start, end (a push's last commit registers
# too), register (by hand), revert, rollback,
# retention-mark, retention-clear, ...
PUSH_POINTS = (
    "push.before-start",
    "push.after-start",
    "push.mid-write",
    "push.after-write",
    "push.after-audit",  # only with an audit: its checks passed, the last commit not yet sent
    "push.after-end",
)
SET_POINTS = (  # a push set's, between its tables' push points (push.before-start, push.mid-write)
    "set.after-start",  # every table's entry started
    "set.after-write",  # every table's files written (and audited)
    "set.before-commit",  # the one commit that ends every entry, about to be sent
    "set.after-commit",
    "set.after-end",
)
STORE_POINTS = ("store.before-head-swap",)  # every commit, right before the one multi that swaps the head
RETENTION_POINTS = ("retention.after-mark", "retention.mid-delete", "retention.before-clear")
MIRROR_POINTS = ("mirror.after-log-read", "mirror.before-commit", "mirror.after-commit")


class FailpointError(RuntimeError):
    """Raised by a failpoint armed with ':raise'."""


def armed(environ: dict[str, str] | None = None) -> tuple[str, str] | None:
    spec = (environ if environ is not None else os.environ).get(ENV, "")
    if not spec:
        return None
    name, _, action = spec.partition(":")
    return name, action or "kill"


_hooks: dict[str, Callable[[], None]] = {}


def set_hook(name: str, hook: Callable[[], None] | None) -> None:
    """In-process fault tests: call ``hook`` when the code reaches ``name``
    (None removes it). Used where a signal cannot land precisely enough, such
    as muting a connection the moment a commit is sent."""
    if hook is None:
        _hooks.pop(name, None)
    else:
        _hooks[name] = hook


def failpoint(name: str, environ: dict[str, str] | None = None) -> None:
    if _hooks:
        hook = _hooks.get(name)
        if hook is not None:
            hook()
    spec = armed(environ)
    if spec is not None and spec[0] == name:
        _act(name, spec[1])


def _act(name: str, action: str) -> None:
    """What an armed failpoint does: raise, sleep (60 s, or ``sleep=SECONDS``), or kill the process."""
    if action == "raise":
        raise FailpointError(f"failpoint {name}")
    if action == "sleep" or action.startswith("sleep="):
        time.sleep(float(action.partition("=")[2] or 60))
        return
    os.kill(os.getpid(), signal.SIGKILL)
