"""Connecting to ZooKeeper: hosts, chroot, digest authentication, bounded retries.

``LINEAGE_ZK_AUTH=user:password`` makes every znode the project creates owned
by that digest identity (never world-writable); other identities are refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, make_digest_acl

from lineage.errors import AuthError, InvalidInputError, StoreUnavailableError

ENV_ZK = "LINEAGE_ZK"
ENV_AUTH = "LINEAGE_ZK_AUTH"
ENV_SESSION_TIMEOUT = "LINEAGE_ZK_SESSION_TIMEOUT"  # seconds: how soon a dead pusher's claim lapses


@dataclass(frozen=True)
class ZkSettings:
    hosts: str  # "h1:2181,h2:2181" with an optional "/chroot"
    auth: str | None = None  # "user:password"
    session_timeout_s: float = 10.0
    connect_timeout_s: float = 10.0

    @property
    def chroot(self) -> str:
        _, _, chroot = self.hosts.partition("/")
        return "/" + chroot if chroot else ""

    def describe(self) -> str:
        """The hosts, never the secret."""
        return self.hosts + (" (with digest auth)" if self.auth else "")


def parse_auth(auth: str | None) -> tuple[str, str] | None:
    if auth is None or auth == "":
        return None
    user, sep, password = auth.partition(":")
    if not sep or not user or not password:
        raise InvalidInputError(f"{ENV_AUTH} must look like user:password")
    return user, password


def check_hosts(hosts: str) -> str:
    servers, _, chroot = hosts.partition("/")
    if not servers:
        raise InvalidInputError(f"invalid ZooKeeper address {hosts!r}: no host")
    for server in servers.split(","):
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidInputError(f"invalid ZooKeeper address {server!r}: use host:port")
    if chroot:
        for part in chroot.split("/"):
            if (
                not part
                or not part.replace("-", "").replace("_", "").replace(".", "").isalnum()
                or part in (".", "..")
            ):
                raise InvalidInputError(f"invalid ZooKeeper chroot '/{chroot}'")
    return hosts


def acl_for(auth: tuple[str, str] | None) -> list[ACL] | None:
    if auth is None:
        return None
    return [make_digest_acl(auth[0], auth[1], all=True)]


def _client(hosts: str, settings: ZkSettings, auth: tuple[str, str] | None) -> KazooClient:
    return KazooClient(
        hosts=hosts,
        timeout=settings.session_timeout_s,
        connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 2.0},
        command_retry={"max_tries": 3, "delay": 0.05, "max_delay": 1.0, "deadline": 10.0},
        auth_data=[("digest", f"{auth[0]}:{auth[1]}")] if auth else None,
        default_acl=acl_for(auth),
    )


def _start(client: KazooClient, settings: ZkSettings) -> None:
    try:
        client.start(timeout=settings.connect_timeout_s)
    except (KazooTimeoutError, KazooException) as exc:
        client.stop()
        client.close()
        if isinstance(exc, NoAuthError):
            raise AuthError(
                f"ZooKeeper at {settings.describe()} refused this identity",
                remedy="check LINEAGE_ZK_AUTH",
            ) from None
        raise StoreUnavailableError(
            f"cannot reach ZooKeeper at {settings.describe()} within "
            f"{settings.connect_timeout_s:.0f}s ({type(exc).__name__})",
            remedy="check --zk / LINEAGE_ZK, or run 'lineage zk start' for the embedded server",
        ) from None


def connect(settings: ZkSettings) -> KazooClient:
    """A started client. Creates the chroot node first when it is missing."""
    check_hosts(settings.hosts)
    auth = parse_auth(settings.auth)
    chroot = settings.chroot
    if chroot:
        servers = settings.hosts.partition("/")[0]
        bootstrap = _client(servers, settings, auth)
        _start(bootstrap, settings)
        try:
            missing = bootstrap.exists(chroot) is None
        except NoAuthError:
            missing = False  # it exists, owned by another identity: reads will say so
        try:
            if missing:
                bootstrap.ensure_path(chroot, acl=acl_for(auth))
        except NoAuthError:
            raise AuthError(f"ZooKeeper refused to create chroot {chroot}: not authorised") from None
        finally:
            bootstrap.stop()
            bootstrap.close()
    client = _client(settings.hosts, settings, auth)
    _start(client, settings)
    return client


def session_timeout_from_env() -> float:
    raw = os.environ.get(ENV_SESSION_TIMEOUT, "10")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 1.0 <= value <= 60.0:
        raise InvalidInputError(f"{ENV_SESSION_TIMEOUT}={raw!r}: give seconds from 1 to 60")
    return value


def settings_from_env(hosts: str | None = None, auth: str | None = None) -> ZkSettings | None:
    """Settings from flags, then the environment; None means the embedded server."""
    hosts = hosts or os.environ.get(ENV_ZK) or None
    if hosts is None:
        return None
    return ZkSettings(
        hosts=check_hosts(hosts),
        auth=auth or os.environ.get(ENV_AUTH) or None,
        session_timeout_s=session_timeout_from_env(),
    )
