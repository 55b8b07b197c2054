"""Deep storage through ``pyarrow.fs``: a local directory, S3, GCS or HDFS.

A :class:`DeepStore` is bound to one table root. Every location it takes is
a relative path checked by :func:`segment_lineage.lineage.core.names.check_location`, joined under
the root, and (on a local file system) resolved again so that a symlink
leading out of the root is refused. The store is small and picklable, so
Spark executors rebuild it from its settings.

S3-compatible endpoints (MinIO, moto) are reached with
``LINEAGE_S3_ENDPOINT=http://127.0.0.1:9000``; credentials come from the usual
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` variables, read by pyarrow.
The endpoint and ``AWS_REGION`` come in :class:`segment_lineage.lineage.config.Settings`
(by default, the environment's) and travel with the store.
"""

from __future__ import annotations

import os
import posixpath
import stat
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import ParseResult, unquote, urlparse

from segment_lineage.lineage.config import Settings
from segment_lineage.lineage.core.names import check_location
from segment_lineage.lineage.core.roots import STATE_MARKER
from segment_lineage.lineage.storage.claims import CLAIM_FILE, check_no_state_dir
from segment_lineage.lineage.storage.errors import StorageError
from segment_lineage.lineage.storage.files import Footer
from segment_lineage.lineage.storage.folders import Folders
from segment_lineage.lineage.storage.unlinking import DeleteBatch

if TYPE_CHECKING:  # imported where used: pyarrow takes ~150 ms to load, and most commands never need it
    import pyarrow.fs as pafs

SCHEMES = ("file", "s3", "gs", "gcs", "hdfs")


@dataclass(frozen=True)
class FileInfo:
    location: str  # relative to the root
    size: int
    mtime_ms: int | None


@dataclass(frozen=True)
class DeepStore:
    """One table's root in deep storage."""

    root: str  # as configured on the table
    scheme: str  # "file", "s3", "gs", "hdfs"
    base: str  # the root as a path inside the file system
    s3_endpoint: str | None = field(default=None, repr=False)  # may carry credentials: never printed
    aws_region: str | None = None

    @staticmethod
    def for_root(root: str, settings: Settings | None = None) -> DeepStore:
        """The store of ``root``; ``settings`` (by default, the environment's)
        give the S3 endpoint and region."""
        parsed = urlparse(root)
        scheme = _scheme(root, parsed)
        base = _local_base(root, parsed) if scheme == "file" else _remote_base(root, parsed, scheme)
        given = Settings.from_env() if settings is None else settings
        return DeepStore(
            root=root,
            scheme="gs" if scheme == "gcs" else scheme,
            base=base,
            s3_endpoint=given.s3_endpoint,
            aws_region=given.aws_region,
        )

    # ---- the file system -------------------------------------------------------

    def filesystem(self) -> pafs.FileSystem:
        import pyarrow.fs as pafs

        if self.scheme == "file":
            return pafs.LocalFileSystem()
        if self.scheme == "s3":
            return self._s3_filesystem()
        if self.scheme == "gs":
            return pafs.GcsFileSystem()
        parsed = urlparse(self.root)
        return pafs.HadoopFileSystem(parsed.hostname or "default", parsed.port or 0)

    def _s3_filesystem(self) -> pafs.S3FileSystem:
        """S3, or an S3-compatible endpoint (see the module's docstring)."""
        import pyarrow.fs as pafs

        if not self.s3_endpoint:
            return pafs.S3FileSystem(region=self.aws_region)
        endpoint = urlparse(self.s3_endpoint)
        return pafs.S3FileSystem(
            endpoint_override=endpoint.netloc or endpoint.path,
            scheme=endpoint.scheme or "http",
            region="us-east-1" if self.aws_region is None else self.aws_region,
            allow_bucket_creation=False,
        )

    def path(self, location: str, folders: Folders | None = None) -> str:
        """The file system path of a location, refused if it leaves the root.

        ``folders`` holds what one batch learned of its folders, so a batch
        resolves each folder once and lists it once for the links in it.
        """
        return self._resolved(location, folders)[0]

    def _resolved(self, location: str, folders: Folders | None) -> tuple[str, str]:
        """:meth:`path`, and where it really leads (the same path on a store
        that is not a local disk)."""
        check_location(location)
        full = posixpath.join(self.base, location)
        if self.scheme != "file":
            return full, full
        if folders is None:
            resolved = os.path.realpath(full)
        else:
            parent, name = posixpath.split(full)
            resolved = posixpath.join(folders.real(parent), name)
            if folders.is_link(parent, name):
                resolved = os.path.realpath(full)
        if resolved != full and not resolved.startswith(self.base + os.sep):
            raise StorageError(f"location {location!r} resolves outside the table root {self.root!r}")
        return full, resolved

    def uri(self, location: str) -> str:
        """A URI for readers that take one (Spark, pyarrow.dataset); an HDFS
        root's names its namenode."""
        full = self.path(location)
        return f"file://{full}" if self.scheme == "file" else self.uri_of(full)

    def locators(self, locations: Iterable[str]) -> list[str]:
        """What engines open for locations the lineage holds (checked when
        stored): a local file's absolute path (DuckDB, Polars and pyarrow
        all open one, whatever its characters; a ``file://`` URI needs
        escaping that DuckDB does not undo), else the store's URI
        (``s3://bucket/key``, ``gs://...``, ``hdfs://host:port/path``).
        Joined to the root as they are: nothing is asked of the file system,
        so a link is not followed (a reader's :meth:`path` refuses one that
        leaves the root)."""
        prefix = self.uri_of(self.base.rstrip("/") + "/")
        return [prefix + location for location in locations]

    # ---- operations ------------------------------------------------------------

    def write_bytes(self, location: str, data: bytes) -> None:
        """Write a whole file. Local writes land under a temporary name first,
        so a crash never leaves a partial file at the final location."""
        fs = self.filesystem()
        target = self.path(location)
        try:
            if self.scheme in ("file", "hdfs"):  # object stores need no directory markers
                fs.create_dir(posixpath.dirname(target), recursive=True)
            if self.scheme == "file":
                temp = f"{target}.tmp-{uuid.uuid4().hex[:8]}"
                with fs.open_output_stream(temp) as out:
                    out.write(data)
                fs.move(temp, target)
            else:
                with fs.open_output_stream(target) as out:
                    out.write(data)
        except OSError as exc:
            raise StorageError(f"writing {location!r} under {self.root!r} failed: {exc}") from None

    # ---- side folders: a folder under the root holding no segment (the mirror's log) ----

    def side_path(self, folder: str, name: str = "") -> str:
        """The path of ``folder`` (a plain name) under the root, or of ``name`` inside it."""
        for part in (folder, name):
            if part and not part.replace("_", "a").replace(".", "a").replace("-", "a").isalnum():
                raise StorageError(f"invalid name {part!r} in a side folder of {self.root!r}")
        if not folder:
            raise StorageError("a side folder needs a name")
        path = posixpath.join(self.base, folder)
        return posixpath.join(path, name) if name else path

    def read_side(self, folder: str, name: str) -> bytes | None:
        """A file of a side folder, or None when it does not exist."""
        import pyarrow.fs as pafs

        fs = self.filesystem()
        path = self.side_path(folder, name)
        try:
            if fs.get_file_info(path).type != pafs.FileType.File:
                return None
            with fs.open_input_stream(path) as stream:
                return bytes(stream.read())
        except OSError as exc:
            raise StorageError(f"reading {folder}/{name} under {self.root!r} failed: {exc}") from None

    def stat_side(self, folder: str, names: Sequence[str]) -> tuple[tuple[int, int] | None, ...]:
        """Each file's (size, modification time in ns) in a side folder, None
        where there is none: one batched look."""
        import pyarrow.fs as pafs

        paths = [self.side_path(folder, name) for name in names]
        try:
            infos = self.filesystem().get_file_info(paths)
        except OSError as exc:
            raise StorageError(f"looking at {folder}/ under {self.root!r} failed: {exc}") from None
        return tuple(
            (int(i.size or 0), int(i.mtime_ns or 0)) if i.type == pafs.FileType.File else None for i in infos
        )

    def list_side(self, folder: str) -> list[str]:
        """The names of the files directly in a side folder (none when it is not there)."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.side_path(folder), recursive=False, allow_not_found=True)
        try:
            infos = self.filesystem().get_file_info(selector)
        except OSError as exc:
            raise StorageError(f"listing {folder}/ under {self.root!r} failed: {exc}") from None
        return sorted(posixpath.basename(i.path) for i in infos if i.type == pafs.FileType.File)

    def check_side_unmarked(self, folder: str, *, walk: bool) -> None:
        """RefusedError when a side folder (where it really is, through a
        link) lies inside or (``walk``) holds a ZooKeeper server's marked data
        directory: nothing there is ours to write or delete."""
        if self.scheme == "file":
            check_no_state_dir(os.path.realpath(self.side_path(folder)), self.root, walk=walk)

    def delete_side(self, folder: str, name: str) -> None:
        """Delete one file of a side folder (gone already is fine)."""
        self.check_side_unmarked(folder, walk=False)
        try:
            self.filesystem().delete_file(self.side_path(folder, name))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"deleting {folder}/{name} under {self.root!r} failed: {exc}") from None

    def remove_side(self, folder: str) -> bool:
        """Delete a side folder and all it holds; False when there was none."""
        import pyarrow.fs as pafs

        fs = self.filesystem()
        path = self.side_path(folder)
        self.check_side_unmarked(folder, walk=True)
        try:
            if fs.get_file_info(path).type == pafs.FileType.NotFound:
                return False
            fs.delete_dir(path)
        except OSError as exc:
            raise StorageError(f"removing {folder}/ under {self.root!r} failed: {exc}") from None
        return True

    def file_sizes(self, locations: Sequence[str]) -> dict[str, int | None]:
        """Each location's file size; None where no regular file is (nothing,
        or a directory). One batched look (a HEAD per object on an object
        store). A location leading out of the root is refused."""
        import pyarrow.fs as pafs

        folders = Folders()
        paths = [self.path(location, folders) for location in locations]
        try:
            infos = self.filesystem().get_file_info(paths)
        except OSError as exc:
            raise StorageError(f"looking for files under {self.root!r} failed: {exc}") from None
        return {
            location: int(info.size or 0) if info.type == pafs.FileType.File else None
            for location, info in zip(locations, infos, strict=True)
        }

    def footers(self, locations: Sequence[str]) -> dict[str, Footer | None]:
        """Each Parquet file's row count and Arrow schema, read from its
        footer (no data is read); None where the file is not one pyarrow can
        read as Parquet."""
        import pyarrow.parquet as pq

        fs = self.filesystem()
        folders = Folders()
        found: dict[str, Footer | None] = {}
        for location in locations:
            try:
                with fs.open_input_file(self.path(location, folders)) as handle:
                    parquet = pq.ParquetFile(handle)
                    found[location] = Footer(int(parquet.metadata.num_rows), parquet.schema_arrow)
            except (OSError, ValueError):  # pyarrow: ArrowInvalid (a ValueError) for no Parquet footer
                found[location] = None
        return found

    def delete(self, location: str) -> bool:
        """Delete one file; False when it was already gone (deleting is
        idempotent). Checked and made as a batch's are (:class:`DeleteBatch`:
        a local delete never follows a link)."""
        batch = self.delete_batch()
        target = batch.place(location)
        with batch.remover() as remove:
            return remove(location, target)

    def delete_batch(self, folders: Folders | None = None) -> DeleteBatch:
        """The checks and the deletes of one batch of files, apart: for a
        batch whose checks run on one thread and whose deletes run on a pool.
        ``folders``: what checks of the same files learned already (each
        folder is then resolved and listed once for both)."""
        return DeleteBatch(self, folders)

    def uri_of(self, path: str) -> str:
        """The URI of a path of this store's file system."""
        if self.scheme == "file":
            return path
        if self.scheme == "hdfs":
            return f"hdfs://{urlparse(self.root).netloc}{path}"
        return f"{self.scheme}://{path}"

    def real_location(self, location: str, folders: Folders | None = None) -> str:
        """Where ``location`` really is, relative to the root: on a local disk a
        path through a symbolic link names another file (the same as
        ``location`` elsewhere, and when no link is in the way)."""
        _, real = self._resolved(location, folders)
        if self.scheme != "file":
            return location
        base = os.path.realpath(self.base) if folders is None else folders.real(self.base)
        # realpath's answers are normal paths: what follows the root is the relative path.
        return real[len(base) + 1 :] if real.startswith(base + os.sep) else location

    def _list_local(self, base: str) -> list[FileInfo]:
        """A local listing that never follows a symbolic link: a link to a
        directory would show live files a second time, under names nothing
        registered, and a delete through it would unlink the real file."""
        out = []
        for folder, dirs, names in os.walk(base, followlinks=False):
            if STATE_MARKER in names:  # a ZooKeeper server's data: the whole root is refused
                check_no_state_dir(folder, self.root, walk=False)
            if folder != self.base and CLAIM_FILE in names:
                dirs[:] = []  # another table's root: none of its files are ours to list
                continue
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
            for name in names:
                found = self._local_file(os.path.join(folder, name))
                if found is not None:
                    out.append(found)
        return sorted(out, key=lambda f: f.location)

    def _local_file(self, full: str) -> FileInfo | None:
        """A local file as listed; None when it is gone, or no regular file."""
        try:
            info = os.lstat(full)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None  # a link, a socket, a fifo: nothing a push writes
        return FileInfo(posixpath.relpath(full, self.base), info.st_size, info.st_mtime_ns // 1_000_000)

    def _list_remote(self, base: str) -> list[FileInfo]:
        """A listing of an object store or HDFS: one recursive look."""
        import pyarrow.fs as pafs

        infos = self.filesystem().get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        claimed = self._claimed_below(infos)  # other tables' roots below this one: never listed as ours
        out = []
        for info in infos:
            if info.type != pafs.FileType.File:
                continue
            if claimed and any(info.path.startswith(other) for other in claimed):
                continue
            relative = posixpath.relpath(info.path, self.base)
            mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else None
            out.append(FileInfo(relative, int(info.size or 0), mtime))
        return sorted(out, key=lambda f: f.location)

    def _claimed_below(self, infos: Sequence[pafs.FileInfo]) -> list[str]:
        """The folders among ``infos`` other than the root that hold a claim
        marker, each with a trailing slash."""
        return [
            posixpath.dirname(info.path).rstrip("/") + "/"
            for info in infos
            if posixpath.basename(info.path) == CLAIM_FILE
            and posixpath.dirname(info.path).rstrip("/") != self.base.rstrip("/")
        ]

    def list(self, prefix: str = "") -> list[FileInfo]:
        """Files under the root (or under ``prefix`` inside it), recursively;
        on a local disk, symbolic links are not followed or listed. Nothing
        under another claimed root (a folder holding a claim marker) is listed."""
        base = self.path(prefix) if prefix else self.base
        try:
            return self._list_local(base) if self.scheme == "file" else self._list_remote(base)
        except OSError as exc:
            raise StorageError(f"listing {self.root!r} failed: {exc}") from None


def _scheme(root: str, parsed: ParseResult) -> str:
    """The scheme of ``root`` (a path's is "file"); StorageError for one not in SCHEMES."""
    scheme = parsed.scheme or "file"
    if len(scheme) == 1:  # a Windows drive letter is not a scheme
        scheme = "file"
    if scheme not in SCHEMES:
        raise StorageError(
            f"unsupported deep-store scheme {scheme!r} in {root!r}: use a path, s3://, gs:// or hdfs://"
        )
    return scheme


def _local_base(root: str, parsed: ParseResult) -> str:
    """A local root as an absolute path, links resolved; StorageError for a file URI naming a host."""
    if parsed.scheme and parsed.netloc not in ("", "localhost"):
        raise StorageError(f"file URI {root!r} names host {parsed.netloc!r}: use file:///absolute/path")
    # A file URI's escapes read, as canonical_root reads them.
    path = unquote(parsed.path) if parsed.scheme else root
    return str(Path(path).expanduser().resolve())


def _remote_base(root: str, parsed: ParseResult, scheme: str) -> str:
    """A bucket's root as ``bucket/path`` (HDFS's: ``/path``); StorageError
    when it names no bucket or host."""
    if not parsed.netloc:
        raise StorageError(f"deep-store root {root!r} names no bucket or host")
    if scheme == "hdfs":
        return "/" + parsed.path.strip("/")
    return (parsed.netloc + "/" + parsed.path.strip("/")).rstrip("/")


class SegmentFileSizes:
    """SegmentFiles on deep storage: the sizes of files under any root.
    Without ``settings``, each call takes the environment's."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings

    def sizes(self, root: str, locations: Sequence[str]) -> dict[str, int | None]:
        return DeepStore.for_root(root, self.settings).file_sizes(locations)

    def footers(self, root: str, locations: Sequence[str]) -> dict[str, Footer | None]:
        return DeepStore.for_root(root, self.settings).footers(locations)
