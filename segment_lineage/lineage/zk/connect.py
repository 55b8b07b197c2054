"""Open a store: an explicit ensemble (``--zk`` / ``LINEAGE_ZK``) or the embedded server."""

from __future__ import annotations

import sys

from segment_lineage.lineage.config import Settings
from segment_lineage.lineage.core.acl import digest_id
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.zk.client import (
    ENV_TLS,
    ZkSettings,
    acl_for,
    connect,
    parse_auth,
    session_timeout,
    tls_settings,
    zk_settings,
)
from segment_lineage.lineage.zk.server import embedded_server
from segment_lineage.lineage.zk.store import ZkStore


def resolve(
    zk: str | None = None, auth: str | None = None, *, settings: Settings | None = None
) -> ZkSettings:
    """The connection to use; starts the embedded server when none is named.
    ``zk`` and ``auth`` win over ``settings`` (by default, from the environment)."""
    given = (Settings.from_env() if settings is None else settings).with_flags(zk=zk, auth=auth)
    named = zk_settings(given)
    if named is not None:
        return named
    if tls_settings(given) is not None:
        raise InvalidInputError(
            f"{ENV_TLS} needs --zk / LINEAGE_ZK: the embedded server speaks plain text on loopback"
        )
    server = embedded_server(settings=given)
    if server.pid() is None:
        # Said on stderr, so a user in a fresh shell who forgot LINEAGE_ZK
        # sees that this is not the ensemble their tables live in.
        sys.stderr.write(
            f"note: no --zk or LINEAGE_ZK given: starting the embedded ZooKeeper at {server.hosts} "
            f"(data in {server.directory}); it keeps running for later commands: "
            "'lineage zk stop' stops it\n"
        )
    server.start()
    return ZkSettings(
        hosts=server.hosts,
        auth=given.zk_auth,
        session_timeout_s=session_timeout(given),
    )


def store_for(settings: ZkSettings) -> ZkStore:
    """A store on a new connection, creating nodes as this identity and its role may."""
    auth = parse_auth(settings.auth)
    return ZkStore(
        connect(settings),
        acl=acl_for(auth),
        identity=digest_id(*auth) if auth else None,
        session_timeout_s=settings.session_timeout_s,
    )


def open_store(
    zk: str | None = None, auth: str | None = None, *, settings: Settings | None = None
) -> ZkStore:
    """A store on ``zk`` (else the settings' hosts, else the embedded server)."""
    return store_for(resolve(zk, auth, settings=settings))
