"""The one ZooKeeper connection of a store: bounded waits, retries, multis, the session."""

from __future__ import annotations

import logging
import time
from typing import Any

from kazoo.client import KazooState
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

from segment_lineage.lineage.core.errors import (
    AuthError,
    StoreUnavailableError,
)

log = logging.getLogger(__name__)

_UNKNOWN = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)


def _refused(result: object) -> bool:
    """A multi's result that failed on its own (not rolled back with the rest)."""
    return isinstance(result, Exception) and not isinstance(result, RolledBackError)


class _Connection:
    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._unanswered_since = None

    def _check_answering(self) -> None:
        """Before sending: StoreUnavailableError (nothing sent) when a wait
        already ran out and the client has not reconnected since."""
        since = self._unanswered_since
        if since is not None and not self.client.connected:
            raise StoreUnavailableError(
                f"ZooKeeper has not answered for {time.monotonic() - since:.0f}s "
                "and is still unreachable; nothing was sent",
                remedy="check the ensemble (a quorum must be up); calls work again as soon as it answers",
            )

    def _wait(self, result: Any, deadline: float | None = None) -> Any:
        """The result of a request sent, waiting at most ``op_timeout_s`` (and
        not past ``deadline``, a time.monotonic())."""
        began = time.monotonic()
        timeout = self.op_timeout_s if deadline is None else min(self.op_timeout_s, deadline - began)
        try:
            value = result.get(timeout=max(0.0, timeout))
        except KazooTimeoutError:
            self._unanswered_since = began
            raise OperationTimeoutError() from None
        self._unanswered_since = None
        return value

    def _op(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """One ZooKeeper call with a bounded wait.

        kazoo's blocking calls wait forever while no server with a quorum
        answers; here a call that outlives ``op_timeout_s`` becomes an
        OperationTimeoutError, handled like a lost connection. Once one has,
        calls fail at once with StoreUnavailableError (nothing sent) until
        the client reconnects.
        """
        self._check_answering()
        return self._wait(getattr(self.client, f"{name}_async")(*args, **kwargs))

    def _op_until(self, deadline: float, name: str, *args: Any, **kwargs: Any) -> Any:
        """:meth:`_op`, one attempt of a retried call: none starts, or waits, past ``deadline``."""
        self._check_answering()
        if time.monotonic() >= deadline:
            raise OperationTimeoutError()
        return self._wait(getattr(self.client, f"{name}_async")(*args, **kwargs), deadline)

    def _retried(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """:meth:`_op` under kazoo's bounded retry, every attempt within one
        ``op_timeout_s`` of the first: a connection lost late in one attempt
        does not buy the next a whole wait of its own."""
        deadline = time.monotonic() + self.op_timeout_s
        return self.client.retry(self._op_until, deadline, name, *args, **kwargs)

    def _commit(self, txn: Any) -> list[Any]:
        self._check_answering()
        try:
            return list(self._wait(txn.commit_async()))
        finally:
            with self._commits_lock:
                self._commits_sent += 1

    @property
    def commits_sent(self) -> int:
        """How many multis this store has sent, landed or not: a watched view
        re-reads after its own process wrote, before the watch event arrives."""
        with self._commits_lock:
            return self._commits_sent

    def _call(self, what: str, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run one read-only call with kazoo's bounded retry; translate errors."""
        try:
            return self._retried(name, *args, **kwargs)
        except StoreUnavailableError:
            raise
        except NoAuthError:
            self._refused_by_policy()
            raise AuthError(
                f"ZooKeeper refused {what}: not authorised",
                remedy="check LINEAGE_ZK_AUTH",
            ) from None
        except NoNodeError:
            raise
        except (KazooException, ConnectionError) as exc:
            raise StoreUnavailableError(f"ZooKeeper {what} failed: {type(exc).__name__}") from None

    def session_alive(self, since: int) -> bool:
        """False once the connection is suspended or the session is lost: work
        that needs agreement (deleting files) must stop. Also False once the
        session ``since`` (a :meth:`session_id`) was replaced by a new one,
        even though the client is connected again."""
        return bool(self.client.connected) and self.session_id() == since

    def session_id(self) -> int | None:
        """The current ZooKeeper session's id (None while there is none)."""
        client_id = self.client.client_id
        return int(client_id[0]) if client_id else None

    def connected(self) -> bool:
        return bool(self.client.connected)

    def confirm_session(self) -> None:
        """One round trip to the server: a dead session fails it."""
        try:
            self._op("exists", self.root)
        except (KazooException, KazooTimeoutError, ConnectionError) as exc:
            raise StoreUnavailableError(f"ZooKeeper did not answer: {type(exc).__name__}") from None
