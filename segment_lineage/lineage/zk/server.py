"""A real ZooKeeper server on loopback, from the jars inside the pyspark wheel.

``lineage zk start|stop|status`` manage one server whose data lives under the
state directory (``LINEAGE_HOME``, default ``~/.local/state/segment-lineage``).
Tests use :class:`ZkServer` directly, and :class:`ZkEnsemble` for three nodes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from segment_lineage.lineage.config import Settings, state_dir
from segment_lineage.lineage.core.errors import InvalidInputError, ServerError
from segment_lineage.lineage.core.roots import STATE_MARKER
from segment_lineage.lineage.zk.processes import listens, pid_exists, port_open, zookeeper_alive

ENV_PORT = "LINEAGE_ZK_PORT"
START_TIMEOUT_S = 60.0
# How long a server started earlier may take to answer: one bounded wait, as
# every ZooKeeper call has (a frozen or overloaded server is told as such).
ANSWER_TIMEOUT_S = 10.0
DEFAULT_HEAP_MB = 256  # when the machine's memory is unknown
MIN_HEAP_MB = 64
MAX_DEFAULT_HEAP_MB = 2048
MAX_HEAP_MB = 64 * 1024


def machine_memory_mb() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1 << 20)
    except (ValueError, OSError, AttributeError):
        return None


def default_heap_mb() -> int:
    """An eighth of the machine's memory, at least 256 MB and at most 2 GB:
    the metadata of retained versions and of commits not yet swept lives on
    the server's heap."""
    total = machine_memory_mb()
    return DEFAULT_HEAP_MB if total is None else max(MIN_HEAP_MB, min(MAX_DEFAULT_HEAP_MB, total // 8))


def parse_heap(text: str) -> int:
    """``512m``, ``2g``, megabytes, or ``auto`` (:func:`default_heap_mb`)."""
    raw = text.strip().lower()
    if raw == "auto":
        return default_heap_mb()
    scale = 1024 if raw.endswith("g") else 1
    digits = raw[:-1] if raw[-1:] in ("m", "g") else raw
    if not digits.isdigit():
        raise InvalidInputError(
            f"invalid heap size {text!r}: give megabytes, a size like 512m or 2g, or auto"
        )
    mb = int(digits) * scale
    if not MIN_HEAP_MB <= mb <= MAX_HEAP_MB:
        raise InvalidInputError(
            f"invalid heap size {text!r}: between {MIN_HEAP_MB}m and {MAX_HEAP_MB // 1024}g"
        )
    return mb


def embedded_heap_mb(settings: Settings) -> int:
    """The embedded server's heap (``LINEAGE_ZK_HEAP``) of ``settings``."""
    return parse_heap(settings.embedded_heap)


def embedded_port(settings: Settings) -> int:
    """The embedded server's port (``LINEAGE_ZK_PORT``) of ``settings``."""
    raw = settings.embedded_port
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ServerError(f"{ENV_PORT}={raw!r} is not a port number")
    return int(raw)


def java_binary(settings: Settings | None = None) -> str:
    """``$JAVA_HOME/bin/java`` when there is one, else ``java`` on the path."""
    home = (Settings.from_env() if settings is None else settings).java_home
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise ServerError(
            "Java was not found: the embedded ZooKeeper needs Java 17 or newer",
            remedy="install a JDK or JRE 17+ (Debian: apt-get install openjdk-17-jre-headless) "
            "or set JAVA_HOME",
        )
    return found


def zookeeper_classpath() -> str:
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServerError("pyspark is not installed; it ships the ZooKeeper server jars")
    jars = Path(spec.origin).parent / "jars"
    if not any(jars.glob("zookeeper-*.jar")):
        raise ServerError(f"no zookeeper-*.jar in {jars}")
    return str(jars / "*")


def four_letter(port: int, word: str = "ruok", host: str = "127.0.0.1", timeout: float = 1.0) -> str | None:
    """Send a four-letter command; None when nothing answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while True:
                data = sock.recv(4096)
                if not data:
                    break
                chunks.append(data)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ZkServer:
    """One ZooKeeper server process (standalone, or one member of an ensemble)."""

    directory: Path
    client_port: int
    server_id: int | None = None
    peers: tuple[tuple[int, int, int], ...] = ()  # (id, quorum port, election port)
    heap_mb: int = field(default_factory=default_heap_mb)
    secure_port: int | None = None  # a TLS client port beside the plain one
    keystore: Path | None = None  # PEM: the server's certificate and unencrypted PKCS#8 key, one file
    truststore: Path | None = None  # PEM CAs of client certificates; given, clients must present one
    extra_config: tuple[str, ...] = ()
    settings: Settings | None = field(default=None, repr=False)  # JAVA_HOME; None: the environment's

    @property
    def pid_file(self) -> Path:
        return self.directory / "zookeeper.pid"

    @property
    def log_file(self) -> Path:
        return self.directory / "zookeeper.log"

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def _pid_written(self) -> int | None:
        """The pid the file names (None: no file, or no number in it)."""
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def pid(self) -> int | None:
        pid = self._pid_written()
        return pid if pid is not None and zookeeper_alive(pid) else None

    def running_heap_mb(self) -> int | None:
        """The heap the running server was started with (from its command line)."""
        pid = self.pid()
        if pid is None:
            return None
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        for arg in args:
            if arg.startswith(b"-Xmx") and arg.endswith(b"m") and arg[4:-1].isdigit():
                return int(arg[4:-1])
        return None

    def is_serving(self) -> bool:
        answer = four_letter(self.client_port, "ruok")
        if answer != "imok" or not self._answers_for_this_directory():
            return False
        if self.secure_port is not None and not port_open(self.secure_port):
            return False  # the TLS port binds a little after the plain one
        if not self.peers:
            return True
        stat = four_letter(self.client_port, "srvr") or ""
        return "Mode: leader" in stat or "Mode: follower" in stat

    def _answers_for_this_directory(self) -> bool:
        """Whether the server on the port is this one (its data directory is
        ours) and serves: another server that took the same port while this
        one started (its own start then fails) does not count. A server whose
        configuration does not allow the question (started before it did)
        counts as this one."""
        answer = four_letter(self.client_port, "conf") or ""
        if "not in the whitelist" in answer:  # a configuration from before: whose socket is it?
            pid = self.pid()
            return pid is not None and listens(pid, self.client_port) is not False
        found = re.search(r"^dataDir=(.+)$", answer, re.MULTILINE)
        if found is None:
            return False  # not serving requests yet
        ours = (self.directory / "data").resolve()
        return Path(found.group(1).strip()).resolve() in (ours, ours / "version-2")

    def _write_config(self) -> Path:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        lines = [
            "tickTime=500",
            "initLimit=20",
            "syncLimit=10",
            f"dataDir={data}",
            f"clientPort={self.client_port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,mntr,stat,conf",
            "maxClientCnxns=0",
            "minSessionTimeout=1000",
            "maxSessionTimeout=60000",
            "autopurge.purgeInterval=1",
            "jute.maxbuffer=1048575",
            *self._tls_config(),
            *self.extra_config,
        ]
        if self.peers:
            (data / "myid").write_text(f"{self.server_id}\n")
            for sid, quorum, election in self.peers:
                lines.append(f"server.{sid}=127.0.0.1:{quorum}:{election}")
        config = self.directory / "zoo.cfg"
        config.write_text("".join(_properties_line(line) + "\n" for line in lines), encoding="ascii")
        return config

    def _tls_config(self) -> list[str]:
        if self.secure_port is None:
            return []
        if self.keystore is None:
            raise ServerError("a secure client port needs a keystore (PEM certificate and key)")
        lines = [
            f"secureClientPort={self.secure_port}",
            "secureClientPortAddress=127.0.0.1",
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"ssl.keyStore.location={self.keystore}",
            "ssl.keyStore.type=PEM",
        ]
        if self.truststore is None:
            return [*lines, "ssl.clientAuth=none"]
        return [
            *lines,
            "ssl.clientAuth=need",
            f"ssl.trustStore.location={self.truststore}",
            "ssl.trustStore.type=PEM",
        ]

    def start(self, wait: bool = True) -> None:
        """Start the process; idempotent when it is already running. Its data
        directory is marked (:data:`STATE_MARKER`): no table root may hold or
        lie inside it, whatever the environment of the process that asks."""
        self.directory.mkdir(parents=True, exist_ok=True)
        marker = self.directory / STATE_MARKER
        if not marker.exists():
            marker.write_text("A ZooKeeper server's data (segment-lineage): never a table's root.\n")
        running = self.pid()
        if running is not None:
            if wait:
                self._wait_running(running)
            return
        if not self.peers and four_letter(self.client_port) is not None:
            raise ServerError(
                f"port {self.client_port} on 127.0.0.1 is taken by another process",
                remedy=f"stop it, or pick another port with {ENV_PORT}",
            )
        java = java_binary(self.settings)
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        main = (
            "org.apache.zookeeper.server.quorum.QuorumPeerMain"
            if self.peers
            else "org.apache.zookeeper.server.ZooKeeperServerMain"
        )
        command = [
            java,
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-Dlog4j2.level=WARN",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            zookeeper_classpath(),
            main,
            str(config),
        ]
        with self.log_file.open("ab") as log:
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.directory,
                env={**os.environ, "LC_ALL": "C.UTF-8"},  # paths to and from Java as UTF-8
            )
        self.pid_file.write_text(f"{proc.pid}\n")
        if wait:
            self.wait_serving()

    def _wait_running(self, pid: int) -> None:
        """Wait for a server this call did not start: for the rest of its
        start-up if it began lately, else one bounded wait, and then say it
        runs but does not answer (frozen, overloaded), not that it is starting."""
        try:
            age_s = time.time() - self.pid_file.stat().st_mtime  # the pid file is written at start
        except OSError:
            age_s = 0.0
        timeout = max(ANSWER_TIMEOUT_S, START_TIMEOUT_S - age_s)
        try:
            self.wait_serving(timeout)
        except ServerError as exc:
            if self.pid() != pid:
                raise
            raise ServerError(
                f"ZooKeeper (pid {pid}) is running but did not answer on port {self.client_port} "
                f"within {timeout:.0f}s: frozen or overloaded",
                remedy=f"see its log ({self.log_file}); restart it: lineage zk stop, then lineage zk start",
            ) from exc

    def wait_serving(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.is_serving():
                return
            written = self._pid_written()  # exists at all: a starting server runs Python's command line first
            if written is not None:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(written, os.WNOHANG)  # a child of ours that exited is reaped, so gone
            if written is None or not pid_exists(written):
                tail = self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
                raise ServerError(f"ZooKeeper exited during start-up; last log lines:\n{tail}")
            time.sleep(0.1)
        raise ServerError(f"ZooKeeper did not answer on port {self.client_port} within {timeout:.0f}s")

    def stop(self, timeout: float = 20.0) -> bool:
        """Stop the process. False when it was not running."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        self._signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and zookeeper_alive(pid):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.05)
        if zookeeper_alive(pid):
            self._signal(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        pid = self.pid()
        if pid is not None:
            self._signal(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.pid_file.unlink(missing_ok=True)

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _properties_line(line: str) -> str:
    """A line of a Java properties file, which Java reads as ISO-8859-1: a
    backslash doubled, and every character past ASCII as ``\\uXXXX`` (UTF-16
    code units), so a data directory under a non-ASCII home is the one named."""
    escaped = line.replace("\\", "\\\\")
    if escaped.isascii():
        return escaped
    units = escaped.encode("utf-16-be")
    return "".join(
        chr(unit) if unit < 0x80 else f"\\u{unit:04x}"
        for unit in (int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2))
    )


def embedded_server(heap_mb: int | None = None, *, settings: Settings) -> ZkServer:
    """The server ``lineage zk`` manages, under the state directory; ``settings``
    give its port, its heap unless ``heap_mb`` is given, and Java."""
    return ZkServer(
        directory=state_dir() / "zookeeper",
        client_port=embedded_port(settings),
        heap_mb=heap_mb if heap_mb is not None else embedded_heap_mb(settings),
        settings=settings,
    )


class ZkEnsemble:
    """A ZooKeeper ensemble of ``size`` servers on loopback."""

    def __init__(self, directory: Path, size: int = 3) -> None:
        ports = [(free_port(), free_port(), free_port()) for _ in range(size)]
        peers = tuple((i + 1, q, e) for i, (_, q, e) in enumerate(ports))
        self.servers = [
            ZkServer(directory / f"zk{i + 1}", client, server_id=i + 1, peers=peers)
            for i, (client, _, _) in enumerate(ports)
        ]

    @property
    def hosts(self) -> str:
        return ",".join(s.hosts for s in self.servers)

    def start(self) -> None:
        for server in self.servers:
            server.start(wait=False)
        for server in self.servers:
            server.wait_serving()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
