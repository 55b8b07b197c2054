"""TLS to ZooKeeper: a secure client port on a real server, certificates made
here, the server's certificate and host name always checked."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from segment_lineage.cli import app
from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage.core.errors import StoreUnavailableError
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.zk.client import TlsSettings, ZkSettings
from segment_lineage.lineage.zk.connect import store_for
from segment_lineage.lineage.zk.server import ZkServer, free_port
from tests.helpers.pki import Authority, Leaf

runner = CliRunner()


@dataclass(frozen=True)
class Pki:
    ca: Authority
    stranger: Authority  # a CA nobody trusts
    server: Leaf  # names localhost only: 127.0.0.1 is another name
    client: Leaf


@dataclass(frozen=True)
class Servers:
    tls: ZkServer  # server certificate only
    mutual: ZkServer  # also requires a client certificate from the CA


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = Authority(directory, "test-ca")
    return Pki(
        ca,
        Authority(directory, "stranger-ca"),
        ca.issue("zk-server", dns=("localhost",)),
        ca.issue("lineage-client", client=True),
    )


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Servers]:
    base = tmp_path_factory.mktemp("tls-zk")
    tls = ZkServer(base / "tls", free_port(), secure_port=free_port(), keystore=pki.server.both)
    mutual = ZkServer(
        base / "mutual", free_port(), secure_port=free_port(), keystore=pki.server.both, truststore=pki.ca.pem
    )
    for server in (tls, mutual):
        server.start(wait=False)
    try:
        for server in (tls, mutual):
            server.wait_serving()
        yield Servers(tls, mutual)
    finally:
        for server in (tls, mutual):
            server.stop()


def hosts(server: ZkServer, name: str = "localhost") -> str:
    return f"{name}:{server.secure_port}/t{uuid.uuid4().hex[:8]}"


def cli(zk: str | None, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    base = {
        "LINEAGE_ZK_TLS": "",
        "LINEAGE_ZK_TLS_CA": "",
        "LINEAGE_ZK_TLS_CERT": "",
        "LINEAGE_ZK_TLS_KEY": "",
    }
    result = runner.invoke(app, [*(["--zk", zk] if zk else []), *args], env={**base, **env})
    return result.exit_code, result.stdout, result.stderr


def quick(zk: str, tls: TlsSettings | None) -> ZkSettings:
    return ZkSettings(hosts=zk, tls=tls, connect_timeout_s=2.0)


def test_the_command_line_and_a_push_over_tls(servers: Servers, pki: Pki, tmp_path: Path) -> None:
    zk = hosts(servers.tls)
    env = {"LINEAGE_ZK_TLS": "1", "LINEAGE_ZK_TLS_CA": str(pki.ca.pem)}
    code, out, err = cli(zk, env, "table", "create", "events", "--root", str(tmp_path / "events"))
    assert code == 0, err
    store = store_for(ZkSettings(hosts=zk, tls=TlsSettings(ca=str(pki.ca.pem))))
    try:
        assert store.client.use_ssl
        m = LineageManager(store)
        push_arrow(m, "events", [pa.table({"n": [1, 2, 3]})])
        with SnapshotReader(m, "events") as reader:
            assert reader.to_arrow().num_rows == 3
    finally:
        store.close()
    code, out, err = cli(zk, env, "segments", "events")
    assert code == 0 and "1 visible segment(s), 3 rows" in out, err
    # Speaking plain text to the TLS port gets nowhere.
    with pytest.raises(StoreUnavailableError, match="cannot reach"):
        store_for(quick(zk, None))


def test_a_certificate_for_another_name_is_refused(servers: Servers, pki: Pki) -> None:
    env = {"LINEAGE_ZK_TLS": "1", "LINEAGE_ZK_TLS_CA": str(pki.ca.pem)}
    code, _, err = cli(hosts(servers.tls, "127.0.0.1"), env, "table", "list")
    assert code == 1
    assert "certificate was refused" in err and "mismatch" in err, err


def test_a_server_signed_by_an_untrusted_ca_is_refused(servers: Servers, pki: Pki) -> None:
    with pytest.raises(StoreUnavailableError, match="certificate was refused"):
        store_for(quick(hosts(servers.tls), TlsSettings(ca=str(pki.stranger.pem))))


def test_a_server_that_requires_a_client_certificate(servers: Servers, pki: Pki, tmp_path: Path) -> None:
    zk = hosts(servers.mutual)
    with pytest.raises(StoreUnavailableError, match="TLS handshake failed"):
        store_for(quick(zk, TlsSettings(ca=str(pki.ca.pem))))
    env = {
        "LINEAGE_ZK_TLS": "1",
        "LINEAGE_ZK_TLS_CA": str(pki.ca.pem),
        "LINEAGE_ZK_TLS_CERT": str(pki.client.cert),
        "LINEAGE_ZK_TLS_KEY": str(pki.client.key),
    }
    code, _, err = cli(zk, env, "table", "create", "events", "--root", str(tmp_path / "events"))
    assert code == 0, err


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LINEAGE_ZK_TLS": "maybe"}, "LINEAGE_ZK_TLS='maybe': use 1 or 0"),
        ({"LINEAGE_ZK_TLS": "1", "LINEAGE_ZK_TLS_CA": "/nonexistent/ca.pem"}, "LINEAGE_ZK_TLS_CA="),
        ({"LINEAGE_ZK_TLS": "1", "LINEAGE_ZK_TLS_CERT": "CA"}, "give both LINEAGE_ZK_TLS_CERT"),
        ({"LINEAGE_ZK_TLS_CA": "CA"}, "set LINEAGE_ZK_TLS=1"),
    ],
)
def test_bad_tls_settings_are_refused_before_connecting(pki: Pki, env: dict[str, str], message: str) -> None:
    env = {k: str(pki.ca.pem) if v == "CA" else v for k, v in env.items()}
    code, _, err = cli(f"127.0.0.1:{free_port()}", env, "table", "list")
    assert code == 2 and message in err, err


def test_tls_needs_an_explicit_ensemble(pki: Pki, lineage_home: Path) -> None:
    code, _, err = cli(None, {"LINEAGE_ZK_TLS": "1", "LINEAGE_ZK_TLS_CA": str(pki.ca.pem)}, "table", "list")
    assert code == 2 and "needs --zk" in err
    assert not (lineage_home / "zookeeper").exists()
