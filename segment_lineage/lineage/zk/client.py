"""Connecting to ZooKeeper: hosts, chroot, digest authentication, TLS, bounded retries.

``LINEAGE_ZK_AUTH=user:password`` authenticates as that digest identity. With
no ACL policy (:mod:`segment_lineage.lineage.core.acl`) every znode the project creates is owned by
it (never world-writable); with one, each node gets its place's ACL.

``LINEAGE_ZK_TLS=1`` connects over TLS, verifying the server's certificate
and that it names the host as written in the hosts string; the CA bundle is
``LINEAGE_ZK_TLS_CA`` (else the system's), and ``LINEAGE_ZK_TLS_CERT`` /
``LINEAGE_ZK_TLS_KEY`` give a client certificate for servers that ask for one.

Those values come in :class:`segment_lineage.lineage.config.Settings`; the
variables' names here are for messages.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import ssl
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, make_digest_acl

from segment_lineage.lineage.config import Settings
from segment_lineage.lineage.core.acl import POLICY_NODE, no_role
from segment_lineage.lineage.core.errors import AuthError, InvalidInputError, StoreUnavailableError
from segment_lineage.lineage.zk.store.paths import ROOT as STORE_ROOT

ENV_ZK = "LINEAGE_ZK"
ENV_AUTH = "LINEAGE_ZK_AUTH"
ENV_SESSION_TIMEOUT = "LINEAGE_ZK_SESSION_TIMEOUT"  # seconds: how soon a dead pusher's claim lapses
ENV_TLS = "LINEAGE_ZK_TLS"
ENV_TLS_CA = "LINEAGE_ZK_TLS_CA"
ENV_TLS_CERT = "LINEAGE_ZK_TLS_CERT"
ENV_TLS_KEY = "LINEAGE_ZK_TLS_KEY"


@dataclass(frozen=True)
class TlsSettings:
    """TLS to ZooKeeper. The server's certificate and host name are always checked."""

    ca: str | None = None  # PEM bundle of CAs to trust; None: the system's
    certfile: str | None = None  # a client certificate, for servers that require one
    keyfile: str | None = None

    def context(self) -> ssl.SSLContext:
        """The same checks kazoo makes, for diagnosing a failed handshake."""
        context = ssl.create_default_context(cafile=self.ca)
        if self.certfile and self.keyfile:
            context.load_cert_chain(self.certfile, self.keyfile)
        return context


@dataclass(frozen=True)
class ZkSettings:
    hosts: str  # "h1:2181,h2:2181" with an optional "/chroot"
    auth: str | None = field(default=None, repr=False)  # "user:password": never printed
    session_timeout_s: float = 10.0
    connect_timeout_s: float = 10.0
    tls: TlsSettings | None = None

    @property
    def chroot(self) -> str:
        _, _, chroot = self.hosts.partition("/")
        return "/" + chroot if chroot else ""

    def describe(self) -> str:
        """The hosts, never the secret."""
        return self.hosts + (" over TLS" if self.tls else "") + (" (with digest auth)" if self.auth else "")


def tls_settings(settings: Settings) -> TlsSettings | None:
    """TLS to ZooKeeper as the settings ask for it; None for plain text."""
    flag = settings.zk_tls.strip().lower()
    if flag not in ("", "0", "1", "true", "false", "yes", "no"):
        raise InvalidInputError(f"{ENV_TLS}={flag!r}: use 1 or 0")
    files = {
        ENV_TLS_CA: settings.zk_tls_ca,
        ENV_TLS_CERT: settings.zk_tls_cert,
        ENV_TLS_KEY: settings.zk_tls_key,
    }
    if flag in ("", "0", "false", "no"):
        given = [var for var, value in files.items() if value]
        if given and flag == "":
            raise InvalidInputError(f"{given[0]} is set but {ENV_TLS} is not: set {ENV_TLS}=1 to use TLS")
        return None
    _check_tls_files(files)
    return TlsSettings(files[ENV_TLS_CA], files[ENV_TLS_CERT], files[ENV_TLS_KEY])


def _check_tls_files(files: dict[str, str | None]) -> None:
    """Refuse a TLS file that is not there, and a certificate without its key (or the reverse)."""
    for var, path in files.items():
        if path is not None and not os.path.isfile(path):
            raise InvalidInputError(f"{var}={path!r}: no such file")
    if (files[ENV_TLS_CERT] is None) != (files[ENV_TLS_KEY] is None):
        raise InvalidInputError(f"give both {ENV_TLS_CERT} and {ENV_TLS_KEY}, or neither")


def _tls_problem(settings: ZkSettings) -> str | None:
    """Why a TLS handshake with the first server fails, when it does (kazoo only times out)."""
    if settings.tls is None:
        return None
    host, _, port = settings.hosts.partition("/")[0].split(",")[0].rpartition(":")
    try:
        context = settings.tls.context()
        with (
            socket.create_connection((host, int(port)), timeout=2.0) as raw,
            context.wrap_socket(raw, server_hostname=host) as conn,
        ):
            conn.sendall(b"ruok")  # a server refusing our certificate says so only now (TLS 1.3)
            conn.recv(16)
    except ssl.SSLCertVerificationError as exc:
        return f"TLS: the server's certificate was refused ({exc.verify_message})"
    except ssl.SSLError as exc:
        return f"TLS handshake failed ({exc.reason or exc})"
    except OSError:
        return None
    return None


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
        _check_server(server)
    if chroot and not all(_chroot_part(part) for part in chroot.split("/")):
        raise InvalidInputError(f"invalid ZooKeeper chroot '/{chroot}'")
    if chroot.split("/")[0] == "zookeeper":
        raise InvalidInputError(
            f"invalid ZooKeeper chroot '/{chroot}': /zookeeper is ZooKeeper's own (its quotas and "
            "configuration); give a chroot of your own"
        )
    return hosts


def _check_server(server: str) -> None:
    """Refuse one ``host:port`` of the address that is not one."""
    host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInputError(f"invalid ZooKeeper address {server!r}: use host:port")


def _chroot_part(part: str) -> bool:
    """A chroot's path part is a plain name: letters, digits, '-', '_' and '.', not '.' or '..'."""
    plain = part.replace("-", "").replace("_", "").replace(".", "")
    return plain.isalnum() and part not in (".", "..")


def acl_for(auth: tuple[str, str] | None) -> list[ACL] | None:
    if auth is None:
        return None
    return [make_digest_acl(auth[0], auth[1], all=True)]


class _Redact(logging.Filter):
    """Scrubs passwords from kazoo's log records: at DEBUG it prints every
    request it sends, the digest credential included, and the session
    password. Filters run only for records that pass the level check."""

    SESSION = re.compile(r"(session_passwd: )\S+")

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        scrubbed = self.SESSION.sub(r"\1<secret>", text)
        for secret in self.secrets:
            scrubbed = scrubbed.replace(secret, "<secret>")
        if scrubbed != text:
            record.msg, record.args = scrubbed, None
        return True


_REDACT = _Redact()
KAZOO_LOG = logging.getLogger("kazoo.client")
KAZOO_LOG.addFilter(_REDACT)


def _client(hosts: str, settings: ZkSettings, auth: tuple[str, str] | None) -> KazooClient:
    if auth is not None:
        _REDACT.secrets.add(auth[1])
    return KazooClient(
        logger=KAZOO_LOG,
        hosts=hosts,
        timeout=settings.session_timeout_s,
        connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 2.0},
        command_retry={"max_tries": 3, "delay": 0.05, "max_delay": 1.0, "deadline": 10.0},
        auth_data=[("digest", f"{auth[0]}:{auth[1]}")] if auth else None,
        default_acl=acl_for(auth),
        use_ssl=settings.tls is not None,
        ca=settings.tls.ca if settings.tls else None,
        certfile=settings.tls.certfile if settings.tls else None,
        keyfile=settings.tls.keyfile if settings.tls else None,
        verify_certs=True,
        check_hostname=settings.tls is not None,
    )


def _refused(client: KazooClient, settings: ZkSettings) -> AuthError:
    """Why ZooKeeper refused this identity the chroot: it has no role in the
    policy there, or, with no policy, the store is another identity's. Asks
    whether the policy node exists (whoever may read it)."""
    try:
        asked = client.exists_async(f"{STORE_ROOT}/{POLICY_NODE}")
        policy = asked.get(timeout=settings.connect_timeout_s) is not None
    except NoAuthError:
        policy = True  # there, and not this identity's to read
    except (KazooTimeoutError, KazooException):
        policy = True  # no answer: the common case, a policy refusing an identity it does not name
    where = f"ZooKeeper at {settings.describe()} refused this identity"
    if not policy:
        return AuthError(
            f"{where}: the store there has no ACL policy and is another identity's",
            remedy=f"set {ENV_AUTH} to the identity that made it, or have that identity put a role policy "
            "in force ('lineage acl apply')",
        )
    user = parse_auth(settings.auth)
    message, remedy = no_role(user[0] if user else None)
    return AuthError(f"{where}: {message}", remedy=remedy)


def _start(client: KazooClient, settings: ZkSettings) -> None:
    try:
        client.start(timeout=settings.connect_timeout_s)
    except NoAuthError:
        # Connected; only kazoo's look at the chroot was refused: this
        # identity may not read the store there. Say why before closing.
        refusal = _refused(client, settings)
        client.stop()
        client.close()
        raise refusal from None
    except (KazooTimeoutError, KazooException) as exc:
        client.stop()
        client.close()
        problem = _tls_problem(settings)
        if problem is not None:
            raise StoreUnavailableError(
                f"cannot connect to ZooKeeper at {settings.describe()}: {problem}",
                remedy=f"check {ENV_TLS_CA} (the CA that signed the server's certificate) and that the "
                "certificate names the host as written in --zk",
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


def session_timeout(settings: Settings) -> float:
    raw = settings.zk_session_timeout
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 1.0 <= value <= 60.0:
        raise InvalidInputError(f"{ENV_SESSION_TIMEOUT}={raw!r}: give seconds from 1 to 60")
    return value


def zk_settings(settings: Settings) -> ZkSettings | None:
    """The connection the settings name; None means the embedded server
    (an address set but empty is refused: a variable meant to name the
    cluster that expanded to nothing must not send the work elsewhere)."""
    if settings.zk_hosts is None:
        return None
    if not settings.zk_hosts.strip():
        raise InvalidInputError(
            f"the ZooKeeper address is set but empty (--zk, {ENV_ZK} or the config file's "
            "zookeeper.hosts): give host:port[,host:port][/chroot], or leave it unset to use the "
            "embedded server"
        )
    return ZkSettings(
        hosts=check_hosts(settings.zk_hosts),
        auth=settings.zk_auth,
        session_timeout_s=session_timeout(settings),
        tls=tls_settings(settings),
    )


def settings_from_env(hosts: str | None = None, auth: str | None = None) -> ZkSettings | None:
    """For scripts: :func:`zk_settings` from these flags, then the environment."""
    return zk_settings(Settings.from_env(zk=hosts, auth=auth))
