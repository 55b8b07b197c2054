"""Open a store: an explicit ensemble (``--zk`` / ``LINEAGE_ZK``) or the embedded server."""

from __future__ import annotations

import os

from lineage.zk_client import (
    ENV_AUTH,
    ZkSettings,
    acl_for,
    connect,
    parse_auth,
    session_timeout_from_env,
    settings_from_env,
)
from lineage.zk_server import embedded_server
from lineage.zk_store import ZkStore


def resolve(zk: str | None = None, auth: str | None = None) -> ZkSettings:
    """The settings to use; starts the embedded server when none are given."""
    settings = settings_from_env(zk, auth)
    if settings is not None:
        return settings
    server = embedded_server()
    server.start()
    return ZkSettings(
        hosts=server.hosts,
        auth=auth or os.environ.get(ENV_AUTH) or None,
        session_timeout_s=session_timeout_from_env(),
    )


def open_store(zk: str | None = None, auth: str | None = None) -> ZkStore:
    settings = resolve(zk, auth)
    client = connect(settings)
    return ZkStore(
        client, acl=acl_for(parse_auth(settings.auth)), session_timeout_s=settings.session_timeout_s
    )
