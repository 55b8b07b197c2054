"""Where deltalake opens a mirrored table's root: its URI and storage
options, or why a Delta mirror cannot live there (a path deltalake cannot
write, a file system it has no log store for)."""

from __future__ import annotations

from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.mirror.errors import MirrorRefusedError

# Characters in a root's path that deltalake (1.6) cannot write a table under:
# '[', ']', '|' and '^' make it panic, a backslash fails. (Polars cannot read
# a table under a path holding a space, '#', '?', '{', '}', '`', '<', '>',
# '"' or a non-ASCII character: docs/engines.md.)
DELTALAKE_BREAKS = "[]|^\\"


def location(store: DeepStore) -> tuple[str, dict[str, str]]:
    """The URI deltalake opens for a table root, and its storage options."""
    _check_path(store)
    if store.scheme == "file":
        return store.base, {}
    if store.scheme == "s3":
        return f"s3://{store.base}", _s3_options(store)
    if store.scheme == "gs":
        return f"gs://{store.base}", {}
    raise MirrorRefusedError(
        f"a Delta mirror needs a local, s3:// or gs:// root; {store.root!r} is {store.scheme}://",
        remedy="keep this table without a mirror, and read it with the project's readers",
    )


def _check_path(store: DeepStore) -> None:
    """Refuse a root whose path Delta or deltalake cannot hold a table under."""
    root = store.root
    if "%" in store.base:
        raise MirrorRefusedError(
            f"a Delta mirror cannot live under {root!r}: Delta reads '%' in a table's path as an escape",
            remedy="keep this table without a mirror, or give it a root without '%'",
        )
    bad = sorted(set(store.base) & set(DELTALAKE_BREAKS))
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise MirrorRefusedError(
            f"a Delta mirror cannot live under {root!r}: deltalake cannot write a table whose path "
            f"holds {shown}",
            remedy="keep this table without a mirror, or give it a root without "
            + " ".join(repr(c) for c in DELTALAKE_BREAKS),
        )


def _s3_options(store: DeepStore) -> dict[str, str]:
    """deltalake's options for an S3 root: the store's endpoint (plain HTTP
    allowed to it) and region, when it names them."""
    options: dict[str, str] = {}
    if store.s3_endpoint:
        options["AWS_ENDPOINT_URL"] = store.s3_endpoint
        options["AWS_ALLOW_HTTP"] = "true"
    if store.aws_region:
        options["AWS_REGION"] = store.aws_region
    return options
