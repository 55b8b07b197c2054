"""``lineage retention health``: ask a running retention daemon how it is.

The daemon serves its health report beside its metrics. The address is
checked before it is asked (credentials are never sent, nor echoed), and the
answer becomes one line and an exit code: 0 healthy, 1 not.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Annotated, Any, TypeGuard

import typer

from segment_lineage.cli.context import emit
from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.retention.errors import RetentionError

USE = "use http://host:port"


def health_target(url: str) -> str:
    """The health address of a daemon's metrics URL (``/healthz`` added),
    InvalidInputError for one that is not http(s)://host[:port][/path]: a
    port out of range, no host, or credentials (never sent, never echoed)."""
    base = url.strip().rstrip("/")
    parts, port = _split_url(url, base)
    checks = (
        (bool(parts.query or parts.fragment), f"no query or fragment; {USE}"),
        (parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in base), USE),
        (port == 0, f"port 0; {USE}"),
    )
    for bad, why in checks:
        if bad:
            raise InvalidInputError(f"invalid daemon URL {url!r}: {why}")
    return base if base.endswith(("/healthz", "/health")) else base + "/healthz"


def _split_url(url: str, base: str) -> tuple[urllib.parse.SplitResult, int | None]:
    """``base`` split, and its port; refused when it holds credentials (said
    before any parsing that would echo them) or a port that is no number in range."""
    if "@" in base.split("://", 1)[-1].split("/", 1)[0]:
        raise InvalidInputError(f"invalid daemon URL: it holds credentials, which are never sent; {USE}")
    try:
        parts = urllib.parse.urlsplit(base)
        return parts, parts.port  # ValueError past 65535 or not a number
    except ValueError as exc:
        raise InvalidInputError(f"invalid daemon URL {url!r}: {exc}; {USE}") from None


def health_report(body: bytes, target: str) -> dict[str, Any]:
    """The daemon's health report, RetentionError for an answer that is none
    (not JSON, or not the report's shape)."""
    try:
        status = json.loads(body)
    except (ValueError, RecursionError):
        status = None
    if not _is_health_report(status):
        raise RetentionError(f"{target} did not answer with a health report")
    return status


def _is_health_report(status: object) -> TypeGuard[dict[str, Any]]:
    """Whether a decoded answer has the report's shape: what every report
    says, and the tables owned and unowned as lists of names."""
    if not isinstance(status, dict) or not all(key in status for key in ("connected", "passes", "failures")):
        return False
    listed = [status.get(k) or [] for k in ("owned", "unowned")]
    return all(isinstance(names, list) and all(isinstance(t, str) for t in names) for names in listed)


def health(
    url: Annotated[
        str, typer.Option("--url", help="The daemon's metrics address.")
    ] = "http://127.0.0.1:9108",
) -> None:
    """Ask a running daemon whether it is healthy (exit 0) or not (exit 1)."""
    target = health_target(url)
    body, code = _ask(target, url)
    status = health_report(body, target)
    emit(status, _health_line(status, code))
    if code != 200:
        raise typer.Exit(1)


def _ask(target: str, url: str) -> tuple[bytes, int]:
    """The daemon's answer at ``target`` and its HTTP status (an error status
    is an answer too); RetentionError when nothing answers."""
    try:
        with urllib.request.urlopen(target, timeout=5) as response:  # noqa: S310 - scheme checked above
            return response.read(), response.status
    except urllib.error.HTTPError as exc:
        return exc.read(), exc.code
    except (urllib.error.URLError, OSError) as exc:
        raise RetentionError(f"no daemon answered at {target}: {getattr(exc, 'reason', exc)}") from None
    except (ValueError, http.client.HTTPException) as exc:  # a port that is no number, a bracket left open
        raise InvalidInputError(f"invalid daemon URL {url!r}: {exc}; {USE}") from None


def _health_line(status: dict[str, Any], code: int) -> str:
    """The report in one line: healthy or not, the daemon's role, its passes,
    and whether a pass is overdue."""
    state = "healthy" if code == 200 else "UNHEALTHY"
    overdue = (
        f"; OVERDUE: no pass completed within two periods of its schedule ({status.get('schedule')})"
        if status.get("overdue")
        else ""
    )
    return (
        f"{state}: {_role(status)}, connected={status.get('connected')}, passes={status.get('passes')}, "
        f"failures={status.get('failures')}, last error: {status.get('last_error') or 'none'}{overdue}"
    )


def _role(status: dict[str, Any]) -> str:
    """What the daemon owns (or standby), and the tables nobody owns."""
    owned, unowned = status.get("owned") or [], status.get("unowned") or []
    role = f"owns {len(owned)} of {status.get('tables')} table(s)" if owned else "standby"
    return role + (f"; NOBODY OWNS {len(unowned)}: {', '.join(unowned[:5])}" if unowned else "")
