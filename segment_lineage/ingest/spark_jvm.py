"""Starting Spark's JVM without its start-up chatter.

Spark's launcher always opens the ``jdk.incubator.vector`` module, so the JVM
prints ``WARNING: Using incubator modules`` to its standard error before any
logging configuration applies. When this process has no JVM yet, the JVM is
started here (as PySpark starts it, through ``spark-submit``) with its
standard error piped through a thread that drops that line and copies every
other line through unchanged.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Mapping
from typing import IO

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway

DROPPED = (b"WARNING: Using incubator modules",)


def _copy_stderr(stream: IO[bytes]) -> None:
    for line in iter(stream.readline, b""):
        if not line.startswith(DROPPED):
            with contextlib.suppress(OSError):  # stderr closed: keep draining, or the JVM blocks
                os.write(2, line)  # where the JVM would have written it


def start_quiet_jvm(options: Mapping[str, str]) -> bool:
    """Start the process's Spark context with ``options`` (``spark.master``
    among them) on a JVM whose start-up warning is dropped; False (nothing
    done) when a JVM already runs in this process."""
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return False
    conf = SparkConf(loadDefaults=False).setAll(list(options.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    stream = gateway.proc.stderr
    if stream is not None:
        threading.Thread(target=_copy_stderr, args=(stream,), name="spark-stderr", daemon=True).start()
    SparkContext(conf=conf, gateway=gateway)
    return True
