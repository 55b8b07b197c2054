"""The deployment files, checked without a Docker engine: the compose file
parses, names what exists, and every command and setting it uses is real."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from segment_lineage.cli import app
from segment_lineage.lineage.config import SETTINGS, parse
from segment_lineage.sample import write_sample
from tests.helpers.paths import REPO

ROOT = REPO
DOCKER = ROOT / "docker"
runner = CliRunner()


def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yml").read_text())
    return doc


def lineage_commands(services: dict[str, Any]) -> list[list[str]]:
    """Every 'lineage ...' invocation: exec-form commands of services whose
    entrypoint is the image's (lineage), and those inside shell scripts."""
    found: list[list[str]] = []
    for service in services.values():
        command = service.get("command") or []
        entrypoint = service.get("entrypoint")
        if entrypoint is None and "image" in service and service["image"].startswith("segment-lineage"):
            found.append([str(part) for part in command])
        elif entrypoint == ["sh", "-ec"]:
            script = re.sub(r'"\$\$\(.*?\)"', "ID", command[0])
            for piece in re.split(r"&&|\|\||\(|\)", script):
                words = shlex.split(piece.replace(">/dev/null", "").replace("2>&1", ""))
                if words and words[0] == "lineage":
                    found.append(words[1:])
    return found


def test_the_topology_is_all_there() -> None:
    services = compose()["services"]
    assert {"zk1", "zk2", "zk3", "s3", "setup", "spark-master", "spark-worker", "push"} <= set(services)
    daemons = [name for name, s in services.items() if s.get("command") == ["retention", "daemon"]]
    assert len(daemons) == 2
    servers = services["zk1"]["environment"]["ZOO_SERVERS"].split()
    assert [s.split("=")[0] for s in servers] == ["server.1", "server.2", "server.3"]
    assert sorted(services[f"zk{i}"]["environment"]["ZOO_MY_ID"] for i in (1, 2, 3)) == ["1", "2", "3"]
    for name in ("push", *daemons):
        assert "LINEAGE_ZK_AUTH" in services[name]["environment"], name  # ACLs on: every role authenticates
    assert "acl apply" in services["setup"]["command"][0]


def test_every_lineage_command_and_option_in_compose_exists() -> None:
    commands = lineage_commands(compose()["services"])
    assert len(commands) >= 6
    for words in commands:
        path = [w for w in words if not w.startswith("-")]
        for depth in range(len(path), 0, -1):  # the longest prefix that is a command
            result = runner.invoke(app, [*path[:depth], "--help"])
            if result.exit_code == 0:
                break
        assert result.exit_code == 0, words
        for option in (w for w in words if w.startswith("--")):
            assert option in result.stdout, (words, option)


def test_every_setting_compose_uses_is_a_known_one() -> None:
    config = parse((DOCKER / "lineage.toml").read_text(), "docker/lineage.toml")
    known = {s.env for s in SETTINGS}
    assert set(config) <= known
    assert tomllib.loads((DOCKER / "lineage.toml").read_text())["zookeeper"]["hosts"].count(",") == 2
    env_file = dict(
        line.split("=", 1) for line in (DOCKER / ".env").read_text().splitlines() if line and line[0] != "#"
    )
    text = (DOCKER / "compose.yml").read_text()
    for variable in re.findall(r"\$\{(\w+)\}", text):
        assert variable in env_file, variable
    for service in compose()["services"].values():
        for name in service.get("environment") or {}:
            if name.startswith("LINEAGE_"):
                assert name in known | {"LINEAGE_CONFIG"}, name


def test_the_image_holds_every_package_and_the_sample_writer() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    import tomllib

    project = tomllib.loads((DOCKER.parent / "pyproject.toml").read_text())
    packages = [p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]]
    assert packages == ["segment_lineage"]  # one import namespace for everything the wheel installs
    for package in packages:
        assert f"COPY {package} ./{package}" in text, package
    assert "spark-class" in str(compose()["services"]["spark-master"]["entrypoint"])


def test_the_sample_writer(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    written = write_sample(tmp_path, 10, 3, "x")
    assert len(written) == 3
    table = pq.read_table(tmp_path)
    assert sorted(table.column("i").to_pylist()) == list(range(10))
    assert len(write_sample(tmp_path, 4, 1, "y")) == 1  # replaces the earlier files
    assert pq.read_table(tmp_path).num_rows == 4
