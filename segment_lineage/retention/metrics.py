"""The retention daemon's Prometheus metrics: what operations.md's alerts
read (ownership per table, passes, what was reclaimed), in the registry
the jobs registered on the daemon add theirs to (the mirrors' lag), served
with its ``/healthz`` on ``--metrics-port``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from segment_lineage.retention.errors import RetentionError
from segment_lineage.retention.report import PassSummary


class Metrics:
    """The daemon's Prometheus metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.passes = Counter(
            "lineage_retention_passes", "Passes run (over the tables this daemon owned).", registry=r
        )
        self.table_passes = Counter(
            "lineage_retention_table_passes", "Tables passed over (one per owned table per pass).", registry=r
        )
        self.failures = Counter(
            "lineage_retention_pass_failures", "Passes that failed or reported errors.", registry=r
        )
        self.files = Counter("lineage_retention_files_deleted", "Files deleted.", registry=r)
        self.bytes = Counter("lineage_retention_bytes_deleted", "Bytes of segment files deleted.", registry=r)
        self.entries = Counter("lineage_retention_entries_removed", "Lineage entries removed.", registry=r)
        self.pending = Gauge("lineage_retention_pending_deletions", "Files waiting for deletion.", registry=r)
        self.oldest = Gauge(
            "lineage_retention_oldest_pending_age_seconds",
            "Age of the oldest pending deletion (0 when none).",
            registry=r,
        )
        self.last_success = Gauge(
            "lineage_retention_last_success_timestamp_seconds",
            "Unix time of the last pass that finished without errors.",
            registry=r,
        )
        self.leader = Gauge(
            "lineage_retention_leader", "1 while this daemon owns at least one table.", registry=r
        )
        self.tables_owned = Gauge("lineage_retention_tables_owned", "Tables this daemon owns.", registry=r)
        self.table_owned = Gauge(
            "lineage_retention_table_owned", "1 while this daemon owns the table.", ["table"], registry=r
        )
        self.table_has_owner = Gauge(
            "lineage_retention_table_has_owner",
            "1 while some daemon owns the table, as this daemon last saw it (0: nobody does).",
            ["table"],
            registry=r,
        )
        self.overdue = Gauge(
            "lineage_retention_pass_overdue",
            "1 while this daemon owns tables and has completed no pass within two periods of its schedule.",
            registry=r,
        )
        self.table_failures = Counter(
            "lineage_retention_table_failures",
            "Tables a pass reported errors for (unreadable ones included).",
            registry=r,
        )
        self.unreadable = Gauge(
            "lineage_retention_unreadable_tables",
            "Tables the last pass skipped because their metadata cannot be decoded.",
            registry=r,
        )

    def record(self, done: PassSummary, oldest_age_s: float) -> None:
        """What one pass did, summed over the tables it passed over."""
        self.table_passes.inc(done.tables)
        self.table_failures.inc(done.failed_tables)
        self.unreadable.set(done.unreadable)
        self.files.inc(done.files)
        self.bytes.inc(done.bytes)
        self.entries.inc(done.entries)
        self.pending.set(done.pending)
        self.oldest.set(oldest_age_s)

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))


Health = Callable[[], tuple[bool, dict[str, object]]]


def serve(host: str, port: int, metrics: Metrics, health: Health) -> ThreadingHTTPServer:
    """Serve ``/metrics`` and ``/healthz`` (200 healthy, 503 not) on a thread
    of its own; RetentionError when the address cannot be bound."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._send(200, CONTENT_TYPE_LATEST, metrics.render())
            elif self.path in ("/healthz", "/health"):
                healthy, body = health()
                self._send(200 if healthy else 503, "application/json", json.dumps(body).encode())
            else:
                self._send(404, "text/plain", b"not found: try /metrics or /healthz\n")

        def _send(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return None

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise RetentionError(f"cannot serve metrics on {host}:{port}: {exc.strerror}") from None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
