"""Table roots: one canonical spelling each, and no two that overlap.

Retention deletes files under a table's root that nothing references, so a
root must mean the same place from every process and must never hold another
table's files. A root is made canonical once, when its table is created:

* local paths must be absolute (a relative one would resolve against each
  process's own working directory); ``.`` and ``..`` parts, repeated and
  trailing slashes collapse, and symbolic links resolve
  (:func:`segment_lineage.lineage.storage.claims.resolve_root`, which reads
  the disk: this module is pure);
* URIs keep their scheme (``gcs`` is ``gs``) and lower-case their bucket or host;
* the file system root, a home directory (or a folder holding one) and the
  project's own state directory are refused, with the reason.

Two roots overlap when one equals the other or lies inside it, compared
without regard to case (some stores fold case, and refusing a twin that only
differs in case costs nothing). The store refuses an overlapping root in the
same commit that guards the table's name.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from urllib.parse import SplitResult, unquote, urlsplit

from segment_lineage.lineage.core.errors import InvalidInputError, RefusedError

URI_SCHEMES = {"file": "file", "s3": "s3", "gs": "gs", "gcs": "gs", "hdfs": "hdfs"}


# A file every ZooKeeper server this project starts writes in its data
# directory: that directory (its transaction log, snapshots, config and pid
# file) serves a store. No root may hold one or lie inside one, and nothing
# under a folder holding one is ever listed or deleted, whichever process
# runs retention and whatever its environment says (LINEAGE_HOME).
STATE_MARKER = ".segment-lineage-state"


def _invalid(root: str, problem: str) -> InvalidInputError:
    return InvalidInputError(f"invalid deep-store root {root!r}: {problem}")


def canonical_root(root: str) -> str:
    """The canonical spelling of ``root`` (pure: no link is resolved here)."""
    parsed = urlsplit(root)
    scheme = parsed.scheme.lower()
    if scheme and len(scheme) > 1 and scheme != "file":
        return _canonical_uri(root, parsed, scheme)
    path = root
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise _invalid(root, f"a file URI names host {parsed.netloc!r}: use file:///absolute/path")
        path = unquote(parsed.path)  # a URI's escapes (%20: a space), as every engine reads them
    if not path.startswith("/"):
        raise _invalid(
            root,
            "a local root must be an absolute path (a relative one, or one starting with '~', "
            "means another place in every working directory)",
        )
    normal = posixpath.normpath(path)
    normal = "/" + normal.lstrip("/")  # POSIX keeps a leading '//'; one is enough
    if normal == "/":
        raise _invalid(root, "the file system root holds everything on the machine")
    return normal


def _canonical_uri(root: str, parsed: SplitResult, scheme: str) -> str:
    """A remote root's canonical spelling: its scheme's one name, the bucket or host in lower case."""
    if scheme not in URI_SCHEMES:
        raise _invalid(root, f"unsupported scheme {parsed.scheme!r}: use a path, s3://, gs:// or hdfs://")
    if not parsed.netloc:
        raise _invalid(root, "names no bucket or host")
    path = posixpath.normpath("/" + parsed.path.lstrip("/")).rstrip("/")
    return f"{URI_SCHEMES[scheme]}://{parsed.netloc.lower()}{path}"


def file_uri(root: str, location: str) -> str | None:
    """The absolute URI of ``location`` (relative, checked) under the table
    root ``root``: ``file:///...`` (percent-encoded) for a local root, the
    root's own scheme otherwise. None for a root that is neither (a table
    made before roots were checked)."""
    if root.startswith("/"):
        return PurePosixPath(root, location).as_uri()
    if "://" in root:
        return f"{root.rstrip('/')}/{location}"
    return None


def _key(root: str) -> str:
    return root.casefold().rstrip("/") + "/"


def overlaps(a: str, b: str) -> bool:
    """Whether two canonical roots are the same place or one holds the other."""
    ka, kb = _key(a), _key(b)
    return ka.startswith(kb) or kb.startswith(ka)


def inside(root: str, other: str) -> str | None:
    """``other``'s place relative to ``root`` when it lies strictly inside it, else None."""
    ka, kb = _key(root), _key(other)
    if kb != ka and kb.startswith(ka):
        return other.rstrip("/")[len(root.rstrip("/")) + 1 :]
    return None


def check_no_overlap(table: str, root: str, roots: Mapping[str, str]) -> None:
    """Refuse ``root`` when it overlaps the root of any other table in ``roots``
    (table -> canonical root)."""
    for other, theirs in sorted(roots.items()):
        if other != table and overlaps(root, theirs):
            if _key(root) == _key(theirs):
                how = "is the root of"
            elif _key(theirs).startswith(_key(root)):
                how = "holds the root of"
            else:
                how = "lies inside the root of"
            raise RefusedError(
                f"deep-store root {root!r} {how} table {other!r} ({theirs!r}): retention would "
                "take one table's files for the other's orphans",
                table=table,
                expected="a root that neither holds nor lies inside another table's root",
                found=theirs,
                remedy="give the table a root of its own, beside the others",
            )


# Folders of the system itself: never a root, nor inside one, nor below one.
SYSTEM_DIRS = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
)
# Folders that hold other things: never a root themselves (a folder inside may be).
SHARED_DIRS = ("/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/var", "/var/lib", "/var/tmp")  # noqa: S108


def check_not_dangerous(
    root: str, protected: Iterable[tuple[str, str]], sealed: Iterable[tuple[str, str]] = ()
) -> None:
    """Refuse a local root that is, or holds, a ``protected`` place (a home
    directory, the project's state directory), or that is, holds or lies
    inside a ``sealed`` one (the embedded ZooKeeper's data, the system's own
    folders), or is a shared folder. Each place is a (what, canonical path) pair."""
    _check_not_holding(root, protected)
    _check_apart(root, [*sealed, *(("a folder of the system", d) for d in SYSTEM_DIRS)])
    if _key(root) in {_key(d) for d in SHARED_DIRS}:
        raise _invalid(
            root, "it is a folder shared by everything on the machine: give the table a folder of its own"
        )


def _check_not_holding(root: str, protected: Iterable[tuple[str, str]]) -> None:
    """A root is not, and does not hold, a protected place (one may lie inside it)."""
    for what, place in protected:
        if place and place != "/" and _key(place).startswith(_key(root)):
            raise _invalid(root, f"it is or holds {what} {place!r}, which retention must never scan")


def _check_apart(root: str, sealed: Iterable[tuple[str, str]]) -> None:
    """A root is not, does not hold, and does not lie inside a sealed place."""
    for what, place in sealed:
        if place and place != "/" and overlaps(root, place):
            raise _invalid(
                root, f"it is, holds or lies inside {what} {place!r}, which retention must never scan"
            )
