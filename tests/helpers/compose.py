"""docker/compose.yml run as local processes on loopback, with no Docker engine.

What compose would run is what runs here: each service's entrypoint and
command (the image's ENTRYPOINT when the service names none), its
environment (``${VAR}`` from docker/.env, ``$$`` as ``$``), its
``depends_on`` order and conditions, and its health check. What a
container would provide is translated, and only that:

- a service's host name and port (``zk1:2181``, ``s3:5000``,
  ``spark-master:7077``, ``127.0.0.1:9108`` inside a daemon's container)
  become ``127.0.0.1`` and a free port of its own, in the commands, the
  environment, the health checks and the mounted config file;
- ``0.0.0.0`` (every interface of a container) becomes ``127.0.0.1``;
- mounted paths (the config file, the ``data`` volume) become local paths;
  the image's ``ENV`` applies, with its home directory made local;
- three images that are not ours are stood in for by the same software
  run locally: ``zookeeper`` by an ensemble of the pyspark wheel's
  ZooKeeper (ids and size from ``ZOO_MY_ID``/``ZOO_SERVERS``), ``moto`` by
  ``python -m moto.server``, and ``aws-cli``'s ``s3 mb`` by boto3; a health
  check piping a four-letter word through ``nc`` asks the server directly.

Anything else the file asks for that this runner cannot translate fails
loudly, so a new service or option cannot pass unnoticed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from segment_lineage.lineage.zk.server import ZkEnsemble, four_letter, free_port

ROOT = Path(__file__).resolve().parent.parent.parent
DOCKER = ROOT / "docker"
SPARK_HOME = Path(__import__("pyspark").__file__).parent
STEP_TIMEOUT_S = 180.0


def env_file(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip()
    return found


def dockerfile() -> tuple[list[str], dict[str, str]]:
    """The image's ENTRYPOINT and ENV, from docker/Dockerfile."""
    text = (DOCKER / "Dockerfile").read_text()
    entry = re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M)
    assert entry, "the Dockerfile names no ENTRYPOINT"
    env = dict(re.findall(r"^ENV (\w+)=(\S+)$", text, re.M))
    return list(json.loads(entry.group(1))), env


class LocalCompose:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.doc: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yml").read_text())
        self.services: dict[str, dict[str, Any]] = self.doc["services"]
        self.vars = env_file(DOCKER / ".env")
        self.entrypoint, self.image_env = dockerfile()
        self.data = work / "data"
        self.data.mkdir(parents=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.ensemble: ZkEnsemble | None = None
        self.addresses: dict[str, str] = {}  # "host:port" in the file -> "127.0.0.1:port" here
        self.own: dict[str, dict[str, str]] = {}  # per service: its own "127.0.0.1:port" -> here
        self.metrics_port = ""
        self._plan_addresses()
        self.config = work / "config.toml"
        self.config.write_text(self.translate((DOCKER / "lineage.toml").read_text(), ""))

    # ---- translating ----------------------------------------------------------

    def _plan_addresses(self) -> None:
        config = (DOCKER / "lineage.toml").read_text()
        for name, spec in self.services.items():
            image = str(spec.get("image", ""))
            if image.startswith("zookeeper:"):
                self.addresses[f"{name}:2181"] = ""  # filled when the ensemble is made
            elif image.startswith("motoserver/moto"):
                self.addresses[f"{name}:5000"] = f"127.0.0.1:{free_port()}"
            command = [str(c) for c in spec.get("command") or []]
            if "--port" in command and "org.apache.spark.deploy.master.Master" in command:
                port = command[command.index("--port") + 1]
                self.addresses[f"{name}:{port}"] = f"127.0.0.1:{free_port()}"
            if spec.get("command") == ["retention", "daemon"]:
                port = re.search(r"^metrics_port = (\d+)$", config, re.M)
                assert port, "docker/lineage.toml names no retention metrics port"
                self.metrics_port = port.group(1)
                self.own[name] = {f"127.0.0.1:{port.group(1)}": f"127.0.0.1:{free_port()}"}
        zk = sorted(a for a in self.addresses if a.endswith(":2181"))
        self.ensemble = ZkEnsemble(self.work / "zk", size=len(zk))
        for address, server in zip(zk, self.ensemble.servers, strict=True):
            self.addresses[address] = server.hosts
        for address, here in self.addresses.items():  # a service reaches itself on loopback
            name, _, port = address.partition(":")
            self.own.setdefault(name, {})[f"127.0.0.1:{port}"] = here

    def translate(self, text: str, service: str) -> str:
        """``text`` as it reads on this machine for ``service``."""
        text = text.replace("$$", "\0")
        text = re.sub(r"\$\{(\w+)\}", lambda m: self.vars[m.group(1)], text)
        text = text.replace("\0", "$")
        for inside, here in {**self.addresses, **self.own.get(service, {})}.items():
            text = text.replace(inside, here)
        text = text.replace("0.0.0.0", "127.0.0.1")
        text = text.replace("/etc/segment-lineage/config.toml", str(self.config))
        return re.sub(r"(?<![\w.])/data\b", str(self.data), text)

    def environment(self, name: str) -> dict[str, str]:
        spec = self.services[name]
        home = self.work / "home" / name
        home.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": f"{Path(sys.executable).parent}:{SPARK_HOME / 'bin'}:/usr/bin:/bin",
            "HOME": str(home),
            "JAVA_HOME": os.environ.get("JAVA_HOME", ""),
            "LANG": "C.UTF-8",
            # The Spark processes' own addresses and places (a container's are its own).
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.work / "spark-logs" / name),
            "SPARK_WORKER_DIR": str(self.work / "spark-work" / name),
            "SPARK_MASTER_WEBUI_PORT": str(free_port()),
            "SPARK_WORKER_WEBUI_PORT": str(free_port()),
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "PYSPARK_PYTHON": sys.executable,
        }
        for key, value in self.image_env.items():
            env[key] = str(home / "state") if key == "LINEAGE_HOME" else value
        given = spec.get("environment") or {}
        assert isinstance(given, Mapping), f"{name}: environment as a list is not translated"
        for key, value in given.items():
            env[str(key)] = self.translate(str(value), name)
        if spec.get("command") == ["retention", "daemon"]:  # a daemon's metrics port is its own
            env["LINEAGE_RETENTION_METRICS_PORT"] = self.metrics(name).rsplit(":", 1)[1]
        return env

    def argv(self, name: str) -> list[str]:
        spec = self.services[name]
        entry = spec.get("entrypoint")
        entry = [str(e) for e in (self.entrypoint if entry is None else entry)]
        command = [str(c) for c in spec.get("command") or []]
        hosts = {a.split(":")[0] for a in self.addresses}
        parts = [*entry, *command]
        own = self.addresses
        out = []
        for i, part in enumerate(parts):
            before = parts[i - 1] if i else ""
            if before == "--host" and part in hosts:  # a process binds the host it is told: loopback
                out.append("127.0.0.1")
            elif before == "--port" and f"{name}:{part}" in own:  # and the port it is told: its own here
                out.append(own[f"{name}:{part}"].rsplit(":", 1)[1])
            else:
                out.append(self.translate(part, name))
        return out

    # ---- running --------------------------------------------------------------

    def log(self, name: str) -> Path:
        return self.work / f"{name}.log"

    def tail(self, name: str) -> str:
        path = self.log(name)
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"

    def start(self, name: str) -> None:
        spec = self.services[name]
        image = str(spec.get("image", ""))
        if image.startswith("zookeeper:"):
            assert self.ensemble is not None
            if not self.ensemble.servers[0].is_serving():
                ids = sorted(int(self.services[n]["environment"]["ZOO_MY_ID"]) for n in self._zk())
                assert ids == list(range(1, len(ids) + 1)), ids
                self.ensemble.start()
            return
        if image.startswith("motoserver/moto"):
            port = self.addresses[f"{name}:5000"].rsplit(":", 1)[1]
            self._popen(name, [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", port], {})
            return
        if image.startswith("amazon/aws-cli"):
            self._aws(name)
            return
        assert image.startswith("segment-lineage"), f"{name}: image {image} is not translated"
        self._popen(name, self.argv(name), self.environment(name))

    def _zk(self) -> list[str]:
        return [n for n, s in self.services.items() if str(s.get("image", "")).startswith("zookeeper:")]

    def _popen(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        with self.log(name).open("ab") as log:
            self.procs[name] = subprocess.Popen(
                argv,
                cwd=self.work,
                env=env or dict(os.environ),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _aws(self, name: str) -> None:
        import boto3

        args = [self.translate(str(c), name) for c in self.services[name]["command"]]
        assert args[0] == "--endpoint-url" and args[2:4] == ["s3", "mb"], f"{name}: {args} is not translated"
        env = {k: self.translate(str(v), name) for k, v in self.services[name]["environment"].items()}
        client = boto3.client(
            "s3",
            endpoint_url=args[1],
            region_name=env["AWS_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )
        client.create_bucket(Bucket=args[4].removeprefix("s3://"))
        self.log(name).write_text(f"make_bucket: {args[4]}\n")

    def healthy(self, name: str) -> bool:
        """The service's own health check, translated, passes."""
        test = [str(t) for t in self.services[name]["healthcheck"]["test"]]
        if test[0] == "CMD-SHELL":
            script = self.translate(test[1], name)
            word = re.fullmatch(r"echo (\w+) \| nc -w \d+ (\S+) (\d+) \| grep -q (\w+)", script)
            if word:  # no nc here: ask this service's server the same four-letter word
                port = int(self.addresses[f"{name}:{word.group(3)}"].rsplit(":", 1)[1])
                return four_letter(port, word.group(1)) == word.group(4)
            argv = ["sh", "-c", script]
        else:
            assert test[0] == "CMD", test
            argv = [self.translate(t, name) for t in test[1:]]
        done = subprocess.run(argv, env=self.environment(name), capture_output=True, timeout=60, check=False)
        return done.returncode == 0

    def wait(self, name: str, condition: str) -> None:
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while time.monotonic() < deadline:
            proc = self.procs.get(name)
            if condition == "service_completed_successfully":
                image = str(self.services[name].get("image", ""))
                if proc is None and image.startswith("amazon/aws-cli"):
                    return
                assert proc is not None, name
                code = proc.poll()
                if code is not None:
                    assert code == 0, f"{name} exited {code}:\n{self.tail(name)}"
                    return
            elif condition == "service_healthy":
                if self.healthy(name):
                    return
            else:
                assert condition == "service_started", condition
                return
            time.sleep(0.5)
        raise TimeoutError(f"{name} not {condition} within {STEP_TIMEOUT_S:.0f}s:\n{self.tail(name)}")

    def dependencies(self, name: str) -> dict[str, str]:
        found = self.services[name].get("depends_on") or {}
        if isinstance(found, list):
            return dict.fromkeys(found, "service_started")
        return {dep: spec.get("condition", "service_started") for dep, spec in found.items()}

    def up(self) -> list[str]:
        """Start every service without a profile, each once its dependencies
        meet their conditions, as ``docker compose up`` does; returns the order."""
        order: list[str] = []
        todo = [n for n, s in self.services.items() if not s.get("profiles")]

        def visit(name: str) -> None:
            if name in order:
                return
            for dep in self.dependencies(name):
                visit(dep)
            order.append(name)

        for name in todo:
            visit(name)
        started: set[str] = set()
        for name in order:
            for dep, condition in self.dependencies(name).items():
                self.wait(dep, condition)
            if name not in started:
                self.start(name)
                started.add(name)
        return order

    def run(self, name: str) -> subprocess.CompletedProcess[str]:
        """``docker compose run --rm NAME``: the service's command once, to its end."""
        return self._once(name, self.argv(name))

    def exec(self, name: str, *argv: str) -> subprocess.CompletedProcess[str]:
        """``docker compose exec NAME ARGV``: another command in the service's environment."""
        return self._once(name, [self.translate(a, name) for a in argv])

    def _once(self, name: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            cwd=self.work,
            env=self.environment(name),
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT_S,
            check=False,
        )

    def metrics(self, name: str) -> str:
        """Where a daemon serves its metrics here ("127.0.0.1:port")."""
        return next(
            here for inside, here in self.own[name].items() if inside.endswith(f":{self.metrics_port}")
        )

    def health(self, name: str) -> dict[str, Any] | None:
        """A daemon's /healthz report (the port its container would serve on)."""
        here = self.metrics(name)
        try:
            with urllib.request.urlopen(f"http://{here}/healthz", timeout=5) as answer:
                report: dict[str, Any] = json.loads(answer.read())
                return report
        except urllib.error.HTTPError as exc:
            report = json.loads(exc.read())
            return report
        except (OSError, ValueError):
            return None

    def stop(self, name: str, timeout: float = 60) -> int:
        """``docker compose stop NAME``: SIGTERM, then its exit code."""
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        return proc.wait(timeout=timeout)

    def down(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self.ensemble is not None:
            self.ensemble.stop()
