"""The root's listing for the orphan scan: the files a retention pass may
touch, each resolved under the root, none under another table's root nor
the mirror's log."""

from __future__ import annotations

from segment_lineage.lineage.core.errors import InvalidInputError, LineageError, RefusedError
from segment_lineage.lineage.core.names import MIRROR_LOG_DIR
from segment_lineage.lineage.core.roots import inside
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.deep import DeepStore, FileInfo
from segment_lineage.lineage.storage.folders import Folders
from segment_lineage.retention.planner import Kept
from segment_lineage.retention.report import TableReport


def touchable_files(
    manager: LineageManager, table: str, root: DeepStore, report: TableReport
) -> list[FileInfo] | None:
    """The root's files that retention may touch (:func:`_touchable`): one
    that resolves outside the root (a symlink leading out) is reported as an
    error, one whose name no push would write (a hidden file) kept for an
    operator, and nothing under another table's root is listed (roots overlap
    only for tables created before roots were checked at create)."""
    try:
        others = [
            f"{place}/"
            for other, theirs in manager.roots().items()
            if other != table and (place := inside(root.root, theirs)) is not None
        ]
        listed = root.list()
    except RefusedError:
        raise  # a ZooKeeper server's data under the root: the pass is refused, nothing done
    except LineageError as exc:
        report.errors.append(f"listing the root for orphans: {exc.message}")
        return None
    folders = Folders()  # each folder resolved and listed once per listing
    return [info for info in listed if _touchable(root, info, others, folders, report)]


def _touchable(
    root: DeepStore, info: FileInfo, others: list[str], folders: Folders, report: TableReport
) -> bool:
    """Whether retention may touch a listed file: not under another table's
    root (``others``) nor the mirror's log (its files are the mirror's,
    never a segment's or an orphan), and resolving inside the root (one that
    does not is reported: an error, or kept for an operator)."""
    location = info.location
    if any(location.startswith(prefix) for prefix in others) or location.startswith(MIRROR_LOG_DIR + "/"):
        return False
    try:
        root.path(location, folders)
    except InvalidInputError:
        report.keep([Kept(location, "a name no push writes (hidden, or odd): left for an operator")])
        return False
    except LineageError as exc:
        report.errors.append(f"refused {location!r}: {exc.message}")
        return False
    return True
