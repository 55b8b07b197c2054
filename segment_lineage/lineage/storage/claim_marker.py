"""The root's claim marker (:data:`segment_lineage.lineage.storage.claims.CLAIM_FILE`)
in deep storage: read, written (on a local disk, created only if absent when
asked), removed, and looked for above and below a root. :class:`RootClaimFiles`
offers them for any root, as the manager's ``ClaimFiles``."""

from __future__ import annotations

import os
import posixpath
import uuid
from typing import TYPE_CHECKING

from segment_lineage.lineage.config import Settings
from segment_lineage.lineage.storage.claims import CLAIM_FILE
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.lineage.storage.errors import StorageError

if TYPE_CHECKING:  # imported where used, as in deep.py: pyarrow is slow to load
    import pyarrow.fs as pafs


def _claim_path(store: DeepStore) -> str:
    return posixpath.join(store.base, CLAIM_FILE)


def read_claim(store: DeepStore) -> bytes | None:
    """The root's claim marker, or None when it has none."""
    try:
        with store.filesystem().open_input_stream(_claim_path(store)) as stream:
            data: bytes = stream.read()
            return data
    except FileNotFoundError:
        return None
    except OSError as exc:
        if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
            return None
        raise StorageError(f"reading the claim marker under {store.root!r} failed: {exc}") from None


def write_claim(store: DeepStore, data: bytes, *, exclusive: bool = False) -> bool:
    """Write the claim marker. ``exclusive``: only if none is there (False
    when one is); a local disk promises that, an object store cannot."""
    fs = store.filesystem()
    target = _claim_path(store)
    try:
        if store.scheme in ("file", "hdfs"):
            fs.create_dir(store.base, recursive=True)
        if store.scheme == "file":
            temp = f"{target}.tmp-{uuid.uuid4().hex[:8]}"
            with fs.open_output_stream(temp) as out:
                out.write(data)
            if not exclusive:
                fs.move(temp, target)
                return True
            try:
                os.link(temp, target)  # fails if the marker exists: the atomic create-if-absent
            except FileExistsError:
                return False
            finally:
                os.unlink(temp)
            return True
        if exclusive and read_claim(store) is not None:
            return False
        with fs.open_output_stream(target) as out:
            out.write(data)
        return True
    except OSError as exc:
        raise StorageError(f"writing the claim marker under {store.root!r} failed: {exc}") from None


def remove_claim(store: DeepStore) -> None:
    """Remove the root's claim marker (gone already is fine)."""
    try:
        store.filesystem().delete_file(_claim_path(store))
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StorageError(f"removing the claim marker under {store.root!r} failed: {exc}") from None


def claims_around(store: DeepStore) -> list[str]:
    """Roots other than this one that hold a claim marker, above it (up to
    the file system's or the bucket's top) or below it."""
    fs = store.filesystem()
    above = _claims_above(store, fs)
    return above + (_claims_below_local(store) if store.scheme == "file" else _claims_below_remote(store, fs))


def _claims_above(store: DeepStore, fs: pafs.FileSystem) -> list[str]:
    """The folders above the root, up to the bucket's top or the file system's, that hold a claim marker."""
    import pyarrow.fs as pafs

    found = []
    parts = store.base.rstrip("/").split("/")
    for end in range(len(parts) - 1, 0, -1):  # nearest first
        parent = "/".join(parts[:end]) or "/"
        info = fs.get_file_info(posixpath.join(parent, CLAIM_FILE))
        if info.type == pafs.FileType.File:
            found.append(store.uri_of(parent))
    return found


def _claims_below_local(store: DeepStore) -> list[str]:
    """The local folders below the root that hold a claim marker (the walk
    follows no link, and stops at each of them)."""
    found = []
    for folder, dirs, names in os.walk(store.base, followlinks=False):
        if folder != store.base and CLAIM_FILE in names:
            found.append(folder)
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
    return found


def _claims_below_remote(store: DeepStore, fs: pafs.FileSystem) -> list[str]:
    """The folders below an object store's or HDFS root that hold a claim marker: one recursive look."""
    import pyarrow.fs as pafs

    selector = pafs.FileSelector(store.base, recursive=True, allow_not_found=True)
    found = []
    for info in fs.get_file_info(selector):
        parent, name = posixpath.split(info.path)
        if name == CLAIM_FILE and parent.rstrip("/") != store.base.rstrip("/"):
            found.append(store.uri_of(parent))
    return found


class RootClaimFiles:
    """ClaimFiles (storage.claims) on deep storage: the claim marker of any root.
    Without ``settings``, each call takes the environment's."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings

    def read_claim(self, root: str) -> bytes | None:
        return read_claim(DeepStore.for_root(root, self.settings))

    def write_claim(self, root: str, data: bytes, *, exclusive: bool = False) -> bool:
        return write_claim(DeepStore.for_root(root, self.settings), data, exclusive=exclusive)

    def remove_claim(self, root: str) -> None:
        remove_claim(DeepStore.for_root(root, self.settings))

    def first_entry(self, root: str) -> str | None:
        import pyarrow.fs as pafs

        store = DeepStore.for_root(root, self.settings)
        selector = pafs.FileSelector(store.base, recursive=False, allow_not_found=True)
        try:
            infos = store.filesystem().get_file_info(selector)
        except OSError as exc:
            raise StorageError(f"listing {root!r} failed: {exc}") from None
        names = sorted(posixpath.basename(i.path.rstrip("/")) for i in infos)
        return next((n for n in names if n != CLAIM_FILE), None)

    def claims_around(self, root: str) -> list[str]:
        try:
            return claims_around(DeepStore.for_root(root, self.settings))
        except OSError as exc:
            raise StorageError(f"looking for claimed roots around {root!r} failed: {exc}") from None
