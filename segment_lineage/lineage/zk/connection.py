"""The one ZooKeeper connection of a store, and the one place kazoo's errors become the project's.

:class:`ZkConnection` wraps a KazooClient with typed calls (``get``,
``exists``, ``create``, ``set``, ``delete``, ``get_children``, ``set_acls``,
``sync``), each waiting at most ``op_timeout_s``; ``retry=True`` runs a ``get`` or ``delete`` under
kazoo's bounded retry within one ``op_timeout_s``; ``doing=...`` makes it a
translated read. Pipelined reads are sent with ``send_*`` and answered with
:meth:`ZkConnection.answer`; multis go through :meth:`ZkConnection.commit`.
Every request goes out through the client's ``*_async`` calls or its
``transaction()`` (the simulation interposes there).

:func:`translated` is the only place a kazoo error becomes a project error:
a refusal (NoAuthError) an AuthError, anything else the call's failure
(StoreUnavailableError unless the caller says "outcome unknown" or
"retryable"); errors the caller handles itself pass through, and a project
error raised inside is never translated twice.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, cast

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import ACL

from segment_lineage.lineage.core.env import SYSTEM, Env
from segment_lineage.lineage.core.errors import AuthError, LineageError, StoreUnavailableError

# What a request to ZooKeeper may fail with (a timeout of a raw wait included).
UNAVAILABLE: tuple[type[Exception], ...] = (KazooException, KazooTimeoutError, ConnectionError, TimeoutError)
# A request that failed with one of these may or may not have been applied.
UNKNOWN: tuple[type[Exception], ...] = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)


def refused(result: object) -> bool:
    """A multi's result that failed on its own (not rolled back with the rest)."""
    return isinstance(result, Exception) and not isinstance(result, RolledBackError)


@contextlib.contextmanager
def translated(
    failed: str | Callable[[str], str] | None,
    *,
    refused: str | None,
    remedy: str | None = None,
    failure: type[LineageError] = StoreUnavailableError,
    failure_remedy: str | None = None,
    passing: tuple[type[Exception], ...] = (),
    on_refused: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Translate the kazoo errors of the calls inside.

    ``refused``: the AuthError message for a NoAuthError (with ``remedy``,
    after ``on_refused`` ran); None treats a refusal like any other failure.
    ``failed``: the failure's message, followed by ": <kazoo error>" (or a
    function of the error's name); it raises ``failure`` (StoreUnavailableError:
    retry later; WriteOutcomeUnknown: maybe applied; RetryableStoreError:
    nothing applied). None lets every other kazoo error through unchanged.
    ``passing``: kazoo errors the caller handles itself (NoNodeError, say).
    A project error (a StoreUnavailableError is a ConnectionError too) passes.
    """
    try:
        yield
    except LineageError:
        raise
    except UNAVAILABLE as exc:
        if isinstance(exc, passing):
            raise
        if isinstance(exc, NoAuthError) and refused is not None:
            if on_refused is not None:
                on_refused()
            raise AuthError(refused, remedy=remedy) from None
        if failed is None:
            raise
        name = said(exc)
        message = failed(name) if callable(failed) else f"{failed}: {name}"
        raise failure(message, remedy=failure_remedy) from None


# A retried read's tries (each waits for the connection; all within one op_timeout_s).
READ_TRIES = 16

# kazoo's errors in a user's words (others by their name).
SAID = {
    "RetryFailedError": "no ZooKeeper server answered",
    "ConnectionLoss": "the connection to ZooKeeper was lost",
    "ConnectionLossException": "the connection to ZooKeeper was lost",
    "ConnectionDropped": "the connection to ZooKeeper was lost",
    "OperationTimeoutError": "no ZooKeeper server answered in time",
    "KazooTimeoutError": "no ZooKeeper server answered in time",
    "SessionExpiredError": "the ZooKeeper session expired",
}


def said(exc: BaseException) -> str:
    """A kazoo error as a user reads it."""
    name = type(exc).__name__
    return SAID.get(name, name)


class ZkConnection:
    """One client's requests, each waiting at most ``op_timeout_s``.

    kazoo's blocking calls wait forever while no server with a quorum
    answers; here a call that outlives ``op_timeout_s`` becomes an
    OperationTimeoutError, handled like a lost connection. Once one has,
    calls fail at once with StoreUnavailableError (nothing sent) until the
    client reconnects.
    """

    def __init__(self, client: KazooClient, op_timeout_s: float, env: Env = SYSTEM) -> None:
        self.client = client
        self.op_timeout_s = op_timeout_s
        self.env = env  # the ids and clocks the store's decisions take (its own waits stay on real time)
        self._commits_sent = 0  # multis sent, whatever their outcome
        self._commits_lock = threading.Lock()
        # When a wait for ZooKeeper last ran out, until it answers again: while
        # the client stays disconnected, later calls fail at once instead of
        # each waiting op_timeout_s in turn (a failed push's cleanup, its owner
        # release), so a command fails within one bounded wait.
        self._unanswered_since: float | None = None
        # Run before a refused read is reported (the policy is read again, for a clearer error).
        self.on_refused: Callable[[], None] | None = None
        client.add_listener(self._on_state)

    def detach(self) -> None:
        self.client.remove_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._unanswered_since = None

    # ---- waiting ---------------------------------------------------------------

    def check_answering(self) -> None:
        """Before sending: StoreUnavailableError (nothing sent) when a wait
        already ran out and the client has not reconnected since."""
        since = self._unanswered_since
        if since is not None and not self.client.connected:
            raise StoreUnavailableError(
                f"ZooKeeper has not answered for {time.monotonic() - since:.0f}s "
                "and is still unreachable; nothing was sent",
                remedy="check the ensemble (a quorum must be up); calls work again as soon as it answers",
            )

    def answer(self, pending: Any, deadline: float | None = None) -> Any:
        """The result of a request sent, waiting at most ``op_timeout_s`` (and
        not past ``deadline``, a time.monotonic())."""
        began = time.monotonic()
        timeout = self.op_timeout_s if deadline is None else min(self.op_timeout_s, deadline - began)
        try:
            value = pending.get(timeout=max(0.0, timeout))
        except KazooTimeoutError:
            self._unanswered_since = began
            raise OperationTimeoutError() from None
        self._unanswered_since = None
        return value

    def settle(self, pending: Any) -> Any:
        """The result of a request sent, waiting at most ``op_timeout_s``,
        without marking ZooKeeper unanswered (a best-effort side request)."""
        try:
            return pending.get(timeout=self.op_timeout_s)
        except KazooTimeoutError:
            raise OperationTimeoutError() from None

    def _run(self, send: Callable[[], Any], retry: bool) -> Any:
        if not retry:
            self.check_answering()
            return self.answer(send())
        # Every attempt within one op_timeout_s of the first: a connection
        # lost late in one attempt does not buy the next a whole wait of its
        # own. Tried until then (not a fixed three times): a process resumed
        # after a pause past its session reconnects first, which on a loaded
        # machine outlasts three quick tries.
        deadline = time.monotonic() + self.op_timeout_s

        def attempt() -> Any:
            self.check_answering()
            if time.monotonic() >= deadline:
                raise OperationTimeoutError()
            return self.answer(send(), deadline)

        tries = KazooRetry(max_tries=READ_TRIES, delay=0.05, max_delay=1.0, deadline=self.op_timeout_s)
        return tries(attempt)

    def reading(self, doing: str) -> AbstractContextManager[None]:
        """The translation of a read-only call: NoNodeError passes to the caller."""
        return translated(
            f"ZooKeeper {doing} failed",
            refused=f"ZooKeeper refused {doing}: not authorised",
            remedy="check LINEAGE_ZK_AUTH",
            passing=(NoNodeError,),
            on_refused=self.on_refused,
        )

    def _call(self, send: Callable[[], Any], doing: str | None, retry: bool = False) -> Any:
        """One call: kazoo's errors as they are, under kazoo's retry when
        ``retry``; or, when ``doing`` names it, a translated read, retried."""
        if doing is None:
            return self._run(send, retry)
        with self.reading(doing):
            return self._run(send, True)

    # ---- typed calls: kazoo's errors, unless ``doing`` names a translated read ---

    def get(
        self,
        path: str,
        *,
        retry: bool = False,
        doing: str | None = None,
        behind: Callable[[], None] | None = None,
    ) -> tuple[bytes, ZnodeStat]:
        """``behind()``, when given, sends requests right after the get (and
        again with it on a retry): one round trip for all. Their answers are
        the caller's to await."""

        def send() -> Any:
            pending = self.client.get_async(path)
            if behind is not None:
                behind()
            return pending

        return cast("tuple[bytes, ZnodeStat]", self._call(send, doing, retry))

    def exists_watch(self, path: str, watch: Callable[[Any], None], *, doing: str) -> ZnodeStat | None:
        """``exists``, with a watch that fires once when the node is created,
        changed or deleted."""
        return self._call(lambda: self.client.exists_async(path, watch=watch), doing)

    def exists(self, path: str, *, doing: str | None = None) -> ZnodeStat | None:
        return self._call(lambda: self.client.exists_async(path), doing)

    def exists_many(self, paths: Sequence[str]) -> list[ZnodeStat | None]:
        """``exists`` of each of ``paths``, sent together: one round trip."""
        self.check_answering()
        pending = [self.client.exists_async(path) for path in paths]
        return [self.answer(p) for p in pending]

    def get_children(self, path: str, *, doing: str | None = None) -> list[str]:
        return cast("list[str]", self._call(lambda: self.client.get_children_async(path), doing))

    def sync(self, path: str, *, doing: str) -> None:
        self._call(lambda: self.client.sync_async(path), doing)

    def set(self, path: str, data: bytes, *, version: int = -1, doing: str | None = None) -> ZnodeStat:
        return self._call(lambda: self.client.set_async(path, data, version=version), doing)

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        acl: Sequence[ACL] | None = None,
        ephemeral: bool = False,
        sequence: bool = False,
        behind: Callable[[], None] | None = None,
    ) -> str:
        """``behind()``, when given, sends requests right after the create (as
        :meth:`get`'s): ZooKeeper answers a session's requests in order, so
        they see the node made. Their answers are the caller's to await."""

        def send() -> Any:
            pending = self.client.create_async(path, data, acl=acl, ephemeral=ephemeral, sequence=sequence)
            if behind is not None:
                behind()
            return pending

        return str(self._run(send, False))

    def delete(self, path: str, *, version: int = -1, retry: bool = False) -> None:
        self._run(lambda: self.client.delete_async(path, version=version), retry)

    def set_acls(self, path: str, acls: Sequence[ACL]) -> None:
        self._run(lambda: self.client.set_acls_async(path, acls), False)

    # ---- pipelined requests: sent together, each answer awaited ----------------

    def send_get(self, path: str) -> Any:
        return self.client.get_async(path)

    def send_exists(self, path: str) -> Any:
        return self.client.exists_async(path)

    def send_set(self, path: str, data: bytes) -> Any:
        return self.client.set_async(path, data)

    def send_get_children(self, path: str) -> Any:
        return self.client.get_children_async(path)

    def send_create(self, path: str, data: bytes, acl: Sequence[ACL] | None) -> Any:
        return self.client.create_async(path, data, acl=acl)

    def send_delete(self, path: str) -> Any:
        return self.client.delete_async(path)

    def retry(self, call: Callable[[], Any]) -> Any:
        """``call`` (a batch of pipelined requests) under kazoo's bounded retry."""
        return self.client.retry(call)

    # ---- multis ----------------------------------------------------------------

    def transaction(self) -> Any:
        return self.client.transaction()

    def commit(self, txn: Any) -> list[Any]:
        """Send a multi; its results, element by element (exceptions for the refused)."""
        self.check_answering()
        try:
            return list(self.answer(txn.commit_async()))
        finally:
            with self._commits_lock:
                self._commits_sent += 1

    @property
    def commits_sent(self) -> int:
        with self._commits_lock:
            return self._commits_sent

    # ---- the session -------------------------------------------------------------

    def session_id(self) -> int | None:
        """The current ZooKeeper session's id (None while there is none)."""
        client_id = self.client.client_id
        return int(client_id[0]) if client_id else None
