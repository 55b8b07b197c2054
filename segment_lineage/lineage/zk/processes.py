"""What this machine says of a local ZooKeeper server's process: whether a
pid is alive and runs ZooKeeper, and which process listens on a port."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def listens(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds the socket listening on ``port`` (None:
    this system does not say, as where there is no ``/proc``)."""
    listening: set[str] = set()
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()  # local address is HEX_IP:HEX_PORT; state 0A is LISTEN
                if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    listening.add(f"socket:[{fields[9]}]")
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except (OSError, ValueError):
        return None
    for fd in descriptors:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") in listening:
                return True
    return False


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists at all (whatever it runs)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def zookeeper_alive(pid: int) -> bool:
    """Whether ``pid`` is a live ZooKeeper server: a pid file left by a
    server that died (a crash, a reboot) may name another process by now,
    which is never ours to signal. Where ``/proc`` tells a process's command
    line, it must run ZooKeeper's main class."""
    if not pid_exists(pid):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no /proc here: the pid is all there is to go by
    except OSError:
        return True
    return b"org.apache.zookeeper." in command
