"""Table operations: create (claiming the root in deep storage), drop,
claim a root again, list."""

from __future__ import annotations

import contextlib
import dataclasses
import os

from segment_lineage.lineage import codec
from segment_lineage.lineage.config import state_dir
from segment_lineage.lineage.core import transitions
from segment_lineage.lineage.core.errors import (
    AuthError,
    ConflictError,
    ContentionError,
    CorruptRecordError,
    InvalidInputError,
    LineageError,
    RefusedError,
    TableExistsError,
    TableNotFoundError,
)
from segment_lineage.lineage.core.model import Audit, EntryState, TableConfig, TableState
from segment_lineage.lineage.core.names import check_table_name
from segment_lineage.lineage.core.retry import Attempts
from segment_lineage.lineage.core.roots import canonical_root, check_no_overlap
from segment_lineage.lineage.core.settings import SettingsChange
from segment_lineage.lineage.manager.commit import Committed, ManagerBase
from segment_lineage.lineage.storage.claims import (
    Claim,
    ClaimFiles,
    check_claim,
    check_no_claim_around,
    read_claim,
    resolve_root,
)
from segment_lineage.lineage.store.contract import OnMarked, TableListing, VersionConflict


class TableOps(ManagerBase):
    """Creating, dropping, claiming and listing tables."""

    def create_table(
        self, config: TableConfig, reason: str | None = None, *, existing_files: bool = False
    ) -> TableState:
        """Create a table. Its root is made canonical first (absolute, links
        resolved, never a protected place) and must not overlap another
        table's root: InvalidInputError, RefusedError. A root that already
        holds files is refused unless ``existing_files``: retention takes
        every file under a table's root that no segment references (after
        the orphan grace), so a user's files there would go."""
        config = dataclasses.replace(config, root=resolve_root(config.root, state_dir()))
        if self.claims is None:
            return self.store.create_table(config, self.audit(reason), self.env.hex_id())
        if not existing_files:
            _refuse_occupied(self.claims, config)
        self._refuse_as_the_store_would(config)
        # Claimed first, then created, then checked: of two stores creating
        # tables on one root at once, the second finds the first's marker.
        fresh = self._claim(config.name, config.root)
        state = self._create_claimed(self.claims, config, reason, fresh=fresh)
        self._check_claimed(config.name, config.root)
        return state

    def _refuse_as_the_store_would(self, config: TableConfig) -> None:
        """The refusals the store would give, said before the marker (and the
        folder it makes) is written: a refused create leaves nothing behind."""
        roots = self.store.roots()
        taken = [name for name in roots if name.casefold() == config.name.casefold()]
        if taken:
            raise TableExistsError(config.name, taken[0])
        check_no_overlap(config.name, config.root, roots)

    def _create_claimed(
        self, claims: ClaimFiles, config: TableConfig, reason: str | None, *, fresh: bool
    ) -> TableState:
        """The store's create of a table whose root is claimed (``fresh``: by this call)."""
        try:
            return self.store.create_table(config, self.audit(reason), self.env.hex_id())
        except (InvalidInputError, RefusedError, TableExistsError, AuthError):
            # Not created by this call: the marker it made goes too, unless a
            # table of that name has this root by now (a twin job that trusted
            # this very marker). After any other failure the table may exist,
            # and keeps its claim.
            if fresh and not _same_root(self.store.roots().get(config.name), config.root):
                with contextlib.suppress(LineageError):
                    claims.remove_claim(config.root)
            raise

    def alter_table(self, table: str, change: SettingsChange, reason: str | None = None) -> Committed:
        """Change a table's settings in one commit, applied to the config the
        commit reads (another alter meanwhile is kept, unless it set the
        same setting); InvalidInputError, changing nothing, for a bad value."""
        if change.empty():
            raise InvalidInputError("nothing to alter: give at least one setting")
        self.require_role(doing="changing a table's settings")  # the commit itself is refused too
        change.applied(self.table(table).config)  # a bad value fails before the commit
        return self.commit(table, lambda s, now: transitions.alter_table(s, change), reason)

    def purge_table(self, table: str, reason: str | None = None) -> Committed:
        """Queue every file of ``table`` for retention and mark it purging
        (:func:`transitions.purge_table`): retention deletes them with its
        usual care, and the table is dropped once none is left
        (:meth:`finish_purge`). An admin's: it hides every row."""
        self.require_role(doing="purging a table")
        return self.commit(table, transitions.purge_table, reason=reason or "table drop --purge")

    def check_not_purging(self, table: str, what: str) -> None:
        """RefusedError naming the purge when ``table`` was dropped with --purge
        (for what is refused anyway, said before anything else is judged)."""
        refused = transitions.purging_refusal(self.table(table).config, what)
        if refused is not None:
            raise refused

    def _claim(self, table: str, root: str) -> bool:
        """Check ``root`` and write its marker naming ``table``; True when no
        marker was there before (this call made it)."""
        assert self.claims is not None
        store_id = self.store.store_id()
        for _ in range(2):
            roots = self.store.roots()

            def holds(claim: Claim, where: str, roots: dict[str, str] = roots) -> bool:
                """Another store's claim always holds; one of this store's,
                while its table still has that root."""
                return claim.store != store_id or _same_root(roots.get(claim.table), where)

            check_no_claim_around(self.claims, table, root, holds)
            claim = read_claim(self.claims, root)
            live = claim is not None and claim.table != table and holds(claim, root)
            check_claim(claim, store_id, table, root, live=live)
            data = codec.encode_claim(store_id, table)
            try:
                if claim is not None:
                    self.claims.write_claim(root, data)
                    return False
                if self.claims.write_claim(root, data, exclusive=True):
                    return True
            except LineageError as exc:
                raise RefusedError(
                    f"could not claim the root {root!r} of table {table!r}: {exc.message}", table=table
                ) from None
        raise ConflictError(
            f"the claim marker under {root!r} kept changing; nothing was created", table=table
        )

    def _check_claimed(self, table: str, root: str) -> None:
        assert self.claims is not None
        claim = read_claim(self.claims, root)
        if claim != Claim(self.store.store_id(), table):
            raise RefusedError(
                f"table {table!r} was created, but the claim marker under {root!r} now names "
                f"{claim.table if claim else 'nobody'!r}: another store claimed the root at the same time",
                table=table,
                remedy="drop this table, or the other, and give each a root of its own",
            )

    def _unclaim(self, table: str, root: str) -> None:
        """After a drop, the root's marker goes if it still names this table
        of this store (best effort: a stale claim of this store never blocks)."""
        if self.claims is None:
            return
        with contextlib.suppress(LineageError):
            if read_claim(self.claims, root) == Claim(self.store.store_id(), table):
                self.claims.remove_claim(root)
                if _same_root(self.store.roots().get(table), root):  # created again meanwhile
                    self.claims.write_claim(root, codec.encode_claim(self.store.store_id(), table))

    def claim_root(self, table: str) -> str:
        """Write ``table``'s claim marker under its root (tables created before
        roots were claimed, or whose claim was lost). Refused when the root is
        claimed by another store or another live table. Returns the root."""
        if self.claims is None:
            raise RefusedError("this manager has no access to deep storage to claim a root")
        self.require_role(doing="claiming a table's root")  # it turns retention on there: an admin's
        root = self._read(table).config.root
        # A legacy root that create would refuse (relative, a home, ...) stays unclaimed.
        resolve_root(root, state_dir())
        self._claim(table, root)
        self._check_claimed(table, root)
        return root

    def list_tables(self) -> list[str]:
        """The tables whose metadata reads; an unreadable one is left out (see table_listing)."""
        return self.store.list_tables()

    def table_listing(self) -> TableListing:
        """Every table, with those whose metadata cannot be decoded named apart."""
        return self.store.table_listing()

    def drop_table(
        self,
        table: str,
        *,
        force: bool = False,
        reason: str | None = None,
        on_marked: OnMarked | None = None,
    ) -> None:
        """Remove a table's metadata. Refused while it has segments, unless forced.

        Files in deep storage are not touched: delete the segments and run
        retention first to reclaim them. The check and the drop are one
        compare-and-set, so a concurrent write makes the drop re-check. An
        interrupted drop is finished by running it again. ``on_marked`` (the
        store's): called with the table's root and config once the drop can
        no longer be refused, before the table's metadata and root claim go.
        """
        check_table_name(table)
        audit = self.audit(reason)
        attempts = Attempts(self.retry)
        while attempts.next():
            try:
                state = self.store.read(table).state
            except TableNotFoundError:
                self._drop_unread(table, audit, on_marked, resume_only=True)
                return
            except CorruptRecordError:
                if not force:
                    raise
                self._drop_unread(table, audit, on_marked, resume_only=False)
                return
            if (refused := drop_refusal(state, force)) is not None:
                raise refused
            try:
                self.store.drop_table(table, audit, state.version, on_marked=on_marked)
                self._unclaim(table, state.config.root)
                return
            except VersionConflict:
                attempts.backoff()
        raise ContentionError(table, attempts.count, attempts.elapsed)

    def _drop_unread(
        self, table: str, audit: Audit, on_marked: OnMarked | None, *, resume_only: bool
    ) -> None:
        """Drop a table whose head was not read: gone (an interrupted drop,
        finished: ``resume_only``) or unreadable (forced). The root the store
        names when marking the drop loses its claim too."""
        roots: list[str] = []

        def marked(root: str | None, config: TableConfig | None) -> None:
            if root is not None:
                roots.append(root)
            if on_marked is not None:
                on_marked(root, config)

        self.store.drop_table(table, audit, None, resume_only=resume_only, on_marked=marked)
        if roots:
            self._unclaim(table, roots[0])


def drop_refusal(state: TableState, force: bool = False) -> RefusedError | None:
    """Why a drop is refused: without ``force``, the table still has
    segments, files awaiting deletion or pushes in progress; with it too,
    files a purge queued (forced, they would stay for good). None: it may go."""
    name = state.config.name
    if state.config.purging_ms is not None and state.pending:
        return RefusedError(
            f"table {name!r} is being dropped with --purge: {len(state.pending)} file(s) wait for "
            "retention" + (", which --force would leave behind for good" if force else ""),
            table=name,
            remedy=f"let retention reclaim them (lineage retention run --table {name} --yes), which then "
            "drops the table",
        )
    live = [e.entry_id for e in state.entries.values() if e.state is EntryState.IN_PROGRESS]
    if force or not (state.segments or state.pending or live):
        return None
    return RefusedError(
        f"table {name!r} still has {len(state.segments)} segment(s), "
        f"{len(state.pending)} file(s) awaiting deletion and {len(live)} push(es) in progress",
        table=name,
        remedy=f"drop it with its files (lineage table drop {name} --purge: retention reclaims them), "
        "or pass --force (its files in deep storage are then left behind)",
    )


def _refuse_occupied(claims: ClaimFiles, config: TableConfig) -> None:
    """RefusedError when the new table's root already holds a file."""
    found = claims.first_entry(config.root)
    if found is not None:
        raise RefusedError(
            f"root {config.root!r} already holds {found!r}: retention deletes every file under a "
            "table's root that no segment references, a day after it first sees it",
            table=config.name,
            remedy="use an empty or new directory, or pass --existing-files if those files "
            "are the table's to register or reclaim",
        )


def _same_root(registered: str | None, root: str) -> bool:
    """Whether a table's registered root is ``root`` (a claim by a table
    that moved elsewhere, or was dropped, no longer holds)."""
    if registered is None:
        return False
    try:
        mine = canonical_root(registered)
    except InvalidInputError:
        return False
    if "://" not in mine:  # a local folder may have moved behind a link since it was registered
        mine, root = os.path.realpath(mine), os.path.realpath(root)
    return mine.casefold() == root.casefold()
