"""The ``lineage`` command's first lines, run before the rest is imported.

A push treats SIGINT and SIGTERM as an interrupt from its first line on:
a push started in the background of a script inherits SIGINT ignored, and
the push's own handler (:mod:`segment_lineage.ingest.interrupts`) comes
only once it starts, so a signal sent while the command was still starting
(importing, connecting, reading its input) was lost and the push went on.
Before anything is written, an interrupt ends the command with nothing done.
"""

from __future__ import annotations

import json
import signal
import sys

from segment_lineage.ingest.interrupts import interrupts_from_the_start  # the standard library only


def main() -> None:
    interrupts_from_the_start(sys.argv)
    try:
        from segment_lineage.cli import app
    except KeyboardInterrupt as exc:  # while the command was still loading: nothing was done
        signum = getattr(exc, "signum", int(signal.SIGINT))
        if "--json" in sys.argv:  # as every error is told to scripts
            report = {"error": "interrupted", "hint": None, "code": 128 + signum, "kind": type(exc).__name__}
            sys.stderr.write(json.dumps(report) + "\n")
        else:
            sys.stderr.write("error: interrupted\n")
        raise SystemExit(128 + signum) from None
    app(prog_name="lineage")  # click ends a write to a closed pipe itself, quietly
