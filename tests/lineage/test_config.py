"""Configuration: TOML file, environment and flags, in that order of strength."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from segment_lineage.cli import app
from segment_lineage.lineage.config import SETTINGS, Settings
from segment_lineage.lineage.core.errors import InvalidInputError
from tests.helpers.run import lineage_process

runner = CliRunner()
CLEAN: dict[str, str | None] = {s.env: None for s in SETTINGS} | {
    "LINEAGE_CONFIG": None,
    "XDG_CONFIG_HOME": "/nonexistent",
}


def cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    # Every setting's variable is named (None: unset), so CliRunner restores what the file filled in.
    result = runner.invoke(app, list(args), env={**CLEAN, **env})
    return result.exit_code, result.stdout, result.stderr


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def shown(out: str) -> dict[str, dict[str, str | None]]:
    return {row["key"]: row for row in json.loads(out)["settings"]}


def test_flags_beat_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[zookeeper]\nhosts = "file:1"\n[spark]\nmaster = "spark://f:7077"\n')
    code, out, err = cli({}, "--json", "--config", str(config), "config", "show")
    assert code == 0, err
    rows = shown(out)
    assert (rows["zookeeper.hosts"]["value"], rows["zookeeper.hosts"]["source"]) == ("file:1", "file")
    assert rows["spark.master"]["source"] == "file"
    assert (rows["embedded.port"]["value"], rows["embedded.port"]["source"]) == ("2191", "default")
    code, out, _ = cli({"LINEAGE_ZK": "env:2"}, "--json", "--config", str(config), "config", "show")
    assert shown(out)["zookeeper.hosts"] == {
        "key": "zookeeper.hosts",
        "value": "env:2",
        "source": "env",
        "env": "LINEAGE_ZK",
    }
    code, out, _ = cli(
        {"LINEAGE_ZK": "env:2", "LINEAGE_CONFIG": str(config)}, "--json", "--zk", "flag:3", "config", "show"
    )
    assert shown(out)["zookeeper.hosts"]["source"] == "flag"
    assert json.loads(out)["file"] == str(config)


def test_the_file_alone_drives_the_commands(zk_hosts: str, tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", f'[zookeeper]\nhosts = "{zk_hosts}"\nsession_timeout = 5\n')
    code, out, err = cli(
        {}, "--config", str(config), "table", "create", "events", "--root", str(tmp_path / "events")
    )
    assert code == 0 and "created table events" in out, err
    code, out, _ = cli({}, "--config", str(config), "table", "list")
    assert "events" in out
    bad = write(
        tmp_path / "bad.toml", f'[zookeeper]\nhosts = "{zk_hosts}"\n[retention]\nmin_grace = "soon"\n'
    )
    code, _, err = cli({}, "--config", str(bad), "retention", "run", "--dry-run")
    assert code == 2 and "invalid period 'soon'" in err
    assert "LINEAGE_RETENTION_MIN_GRACE" not in os.environ


def test_the_default_file_is_used_when_it_exists(tmp_path: Path) -> None:
    home = tmp_path / "xdg"
    (home / "segment-lineage").mkdir(parents=True)
    write(home / "segment-lineage" / "config.toml", '[storage]\ns3_endpoint = "http://127.0.0.1:9000"\n')
    _, out, _ = cli({"XDG_CONFIG_HOME": str(home)}, "--json", "config", "show")
    rows = shown(out)
    assert rows["storage.s3_endpoint"]["source"] == "file"
    _, out, _ = cli({"XDG_CONFIG_HOME": str(tmp_path / "none")}, "--json", "config", "show")
    assert json.loads(out)["file"] is None


def test_secrets_are_masked_and_their_file_must_be_private(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[zookeeper]\nauth = "boss:hunter2-secret"\n')
    for args in (["config", "show"], ["--json", "config", "show"]):
        code, out, err = cli({}, "--config", str(config), *args)
        assert code == 0, err
        assert "boss:****" in out and "hunter2" not in out
    code, out, _ = cli({"LINEAGE_ZK_AUTH": "env-user:env-secret"}, "config", "show")
    assert "env-user:****" in out and "env-secret" not in out
    config.chmod(0o644)
    code, _, err = cli({}, "--config", str(config), "config", "show")
    assert code == 2 and "readable by group or others" in err and "chmod 600" in err
    assert "hunter2" not in err
    endpoint = write(tmp_path / "e.toml", '[storage]\ns3_endpoint = "http://u:hunter2@minio:9000"\n', 0o644)
    code, out, err = cli({}, "--config", str(endpoint), "config", "show")
    assert code == 2 and "holds storage.s3_endpoint" in err and "hunter2" not in out + err
    endpoint.chmod(0o600)
    code, out, err = cli({}, "--config", str(endpoint), "config", "show")
    assert code == 0 and "http://****@minio:9000" in out and "hunter2" not in out, err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[zookeeper]\nhost = 'x:1'\n", "unknown setting zookeeper.host"),
        ("[zk]\nhosts = 'x:1'\n", "unknown setting zk.hosts"),
        ("hosts = 'x:1'\n", "'hosts' must be a [section]"),
        ("[embedded]\nport = '2191'\n", "embedded.port must be an integer"),
        ("[zookeeper]\ntls = 1\n", "zookeeper.tls must be true or false"),
        ("[zookeeper]\nsession_timeout = true\n", "zookeeper.session_timeout must be a number"),
        ("[zookeeper\n", "is not valid TOML"),
        ('[zookeeper]\nhosts = "x:1\\u0000y"\n', "zookeeper.hosts holds a NUL character"),
    ],
)
def test_bad_files_are_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    config = write(tmp_path / "c.toml", text)
    code, _, err = cli({}, "--config", str(config), "config", "show")
    assert code == 2 and message in err, err


def test_a_config_file_that_is_no_regular_file_or_no_text_is_refused(tmp_path: Path) -> None:
    """A FIFO would block the command forever; bytes that are not UTF-8 are not TOML."""
    import subprocess
    import sys

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "segment_lineage", "--config", str(fifo), "config", "show"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in {**os.environ, **CLEAN}.items() if v is not None},
        check=False,
    )
    assert done.returncode == 2 and "is not a regular file" in done.stderr, done.stderr
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"[zookeeper]\nhosts = '\xff'\n")
    binary.chmod(0o600)
    code, _, err = cli({}, "--config", str(binary), "config", "show")
    assert code == 2 and "is not UTF-8 text" in err, err


def test_a_named_file_must_exist(tmp_path: Path) -> None:
    code, _, err = cli({}, "--config", str(tmp_path / "missing.toml"), "config", "show")
    assert code == 2 and "does not exist" in err
    code, _, err = cli({"LINEAGE_CONFIG": str(tmp_path / "gone.toml")}, "config", "show")
    assert code == 2 and "gone.toml does not exist" in err


def test_settings_default_to_what_the_table_documents() -> None:
    defaults = Settings()
    documented = {s.key: s.default for s in SETTINGS}
    assert defaults.zk_session_timeout == documented["zookeeper.session_timeout"]
    assert defaults.embedded_port == documented["embedded.port"]
    assert defaults.embedded_heap == documented["embedded.heap"]
    assert defaults.spark_master == documented["spark.master"]
    assert Settings.from_env({}) == defaults


def test_settings_take_flags_over_the_environment_and_hide_secrets() -> None:
    env = {
        "LINEAGE_ZK": "env:1",
        "LINEAGE_ZK_AUTH": "boss:hunter2",
        "SPARK_MASTER": "spark://env:7077",
        "LINEAGE_S3_ENDPOINT": "http://u:secret@minio:9000",
        "AWS_REGION": "eu-west-1",
        "JAVA_HOME": "/opt/java",
    }
    settings = Settings.from_env(env, zk="flag:2", master="local[3]")
    assert (settings.zk_hosts, settings.zk_auth) == ("flag:2", "boss:hunter2")
    assert settings.spark_master == "local[3]"
    assert (settings.aws_region, settings.java_home) == ("eu-west-1", "/opt/java")
    assert Settings.from_env(env, zk="").zk_hosts == "env:1"  # an empty flag is not given
    assert "hunter2" not in repr(settings) and "secret" not in repr(settings)
    # An empty variable is unset, but the timeout and the port keep it, to refuse it when used (as before).
    blank = Settings.from_env(dict.fromkeys((*env, "LINEAGE_ZK_PORT", "LINEAGE_ZK_SESSION_TIMEOUT"), ""))
    assert (blank.zk_auth, blank.s3_endpoint, blank.java_home) == (None, None, None)
    assert (blank.spark_master, blank.embedded_port, blank.zk_session_timeout) == ("local[2]", "", "")


def test_an_empty_zookeeper_address_is_refused_not_taken_for_the_embedded_server(tmp_path: Path) -> None:
    """A variable meant to name the cluster that expanded to nothing
    (LINEAGE_ZK=$UNSET) must not send the work to a server on this machine."""
    from segment_lineage.lineage.zk.client import zk_settings

    assert zk_settings(Settings.from_env({})) is None  # unset: the embedded server
    empty = r"ZooKeeper address is set but empty \(--zk, LINEAGE_ZK or the config file's zookeeper.hosts\)"
    for env_zk, flag in (("", None), (None, ""), (" ", None)):
        given = {} if env_zk is None else {"LINEAGE_ZK": env_zk}
        with pytest.raises(InvalidInputError, match=empty):
            zk_settings(Settings.from_env(given, zk=flag))
    assert zk_settings(Settings.from_env({"LINEAGE_ZK": ""}, zk="h:1")).hosts == "h:1"  # type: ignore[union-attr]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
    env.update(LINEAGE_ZK="", LINEAGE_HOME=str(tmp_path / "home"))
    done = lineage_process("table", "list", env=env)
    assert done.returncode == 2 and "set but empty" in done.stderr, done.stderr
    # config show tells it as it is: set, empty, from the environment (not "- default").
    code, out, _ = cli({"LINEAGE_ZK": ""}, "--json", "config", "show")
    assert (
        code == 0
        and shown(out)["zookeeper.hosts"]["value"] == ""
        and shown(out)["zookeeper.hosts"]["source"] == "env"
    )
    code, out, _ = cli({"LINEAGE_ZK": "", "LINEAGE_ZK_PORT": ""}, "config", "show")
    rows = {
        line.split()[0]: line.split()[1:]
        for line in out.splitlines()
        if line.startswith(("zookeeper.hosts", "embedded.port"))
    }
    assert rows == {
        "zookeeper.hosts": ["(empty)", "env", "LINEAGE_ZK"],
        "embedded.port": ["(empty)", "env", "LINEAGE_ZK_PORT"],
    }, out
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").iterdir())  # no server started


def test_the_edges_use_the_settings_they_are_given(tmp_path: Path) -> None:
    from segment_lineage.ingest import errors as ingest_errors
    from segment_lineage.lineage.storage.deep import DeepStore
    from segment_lineage.lineage.storage.errors import StorageError
    from segment_lineage.lineage.zk.client import zk_settings
    from segment_lineage.lineage.zk.server import embedded_server

    settings = Settings(zk_hosts="h:1/c", zk_session_timeout="5", embedded_port="2999", embedded_heap="300m")
    server = embedded_server(settings=settings)
    assert (server.client_port, server.heap_mb, server.settings) == (2999, 300, settings)
    assert embedded_server(128, settings=settings).heap_mb == 128  # --heap wins
    zk = zk_settings(settings)
    assert zk is not None and (zk.hosts, zk.session_timeout_s, zk.tls) == ("h:1/c", 5.0, None)
    with pytest.raises(InvalidInputError, match="LINEAGE_ZK_TLS_CA is set but LINEAGE_ZK_TLS is not"):
        zk_settings(Settings(zk_hosts="h:1", zk_tls_ca=str(tmp_path)))
    store = DeepStore.for_root("s3://lake/t", Settings(s3_endpoint="http://m:9000", aws_region="eu-west-1"))
    assert (store.s3_endpoint, store.aws_region) == ("http://m:9000", "eu-west-1")
    assert ingest_errors.StorageError is StorageError  # every `except StorageError` still catches storage's
    with pytest.raises(StorageError):
        DeepStore.for_root("ftp://x/y")
