"""Local folders as one batch of paths sees them: resolved and listed once each."""

from __future__ import annotations

import os
import stat

from segment_lineage.lineage.storage.errors import LinkUnknownError


class Folders:
    """What one batch of paths learns of local folders, each looked at once:
    where a folder really is (its links resolved), and which of its entries
    are symbolic links (one listing of the folder, not a look per file: a
    pass placing 100,000 files lists 1,000 folders). A link made after the
    listing goes unseen here, as one made after a look would: the delete
    itself never follows a link (:mod:`segment_lineage.lineage.storage.unlinking`)."""

    def __init__(self) -> None:
        self._real: dict[str, str] = {}
        self._links: dict[str, frozenset[str] | None] = {}  # None: not listable, each file looked at

    def real(self, folder: str) -> str:
        found = self._real.get(folder)
        if found is None:
            found = self._real[folder] = os.path.realpath(folder)
        return found

    def is_link(self, folder: str, name: str) -> bool:
        if folder not in self._links:
            try:
                with os.scandir(folder) as entries:
                    self._links[folder] = frozenset(e.name for e in entries if e.is_symlink())
            except OSError:
                # Gone, or not listable (a folder one may pass through but not
                # read, or not even enter): its files are looked at one by
                # one, as a listing cannot say which are links.
                self._links[folder] = None
        links = self._links[folder]
        return _looked_at(os.path.join(folder, name)) if links is None else name in links


def _looked_at(path: str) -> bool:
    """Whether ``path`` is a link, looked at by itself (LinkUnknownError
    where it cannot be: a folder on the way that may not be entered)."""
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise LinkUnknownError(f"cannot tell whether {path!r} is a link ({exc.strerror})") from None
