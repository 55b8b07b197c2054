"""A Spark standalone master and worker on loopback, from the installed pyspark."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspark

from segment_lineage.lineage.zk.server import free_port

SPARK_HOME = Path(pyspark.__file__).parent
WORKER_HOSTS = ("127.0.0.2", "127.0.0.3")


class SparkCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str, host: str = "127.0.0.1") -> None:
        env = dict(
            os.environ,
            SPARK_HOME=str(SPARK_HOME),
            PYSPARK_PYTHON=sys.executable,
            SPARK_LOCAL_IP=host,
            SPARK_WORKER_DIR=str(self.directory / "work"),
            SPARK_LOG_DIR=str(self.directory),
        )
        log = (self.directory / f"{name}.log").open("wb")
        self.procs.append(
            subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        )

    def start(self, timeout: float = 90) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(free_port()),
        )
        # Two workers on two loopback addresses: Spark runs a speculative copy
        # of a task only on another host than the original attempt.
        for index, host in enumerate(WORKER_HOSTS):
            self._start(
                f"worker{index}",
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host",
                host,
                "--webui-port",
                str(free_port()),
                "--cores",
                "1",
                "--memory",
                "1g",
                host=host,
            )
        deadline = time.monotonic() + timeout
        logs = [self.directory / f"worker{i}.log" for i in range(len(WORKER_HOSTS))]
        while time.monotonic() < deadline:
            if all(
                log.exists() and "Successfully registered with master" in log.read_text(errors="replace")
                for log in logs
            ):
                return
            time.sleep(0.5)
        tails = "\n".join(log.read_text(errors="replace")[-1500:] for log in logs if log.exists())
        raise RuntimeError(f"the Spark workers did not register:\n{tails}")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
