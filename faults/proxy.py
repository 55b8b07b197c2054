"""A small TCP proxy on loopback that can pass, stall, mute or cut traffic.

Clients connect to the proxy's port; it forwards to one upstream address.
Modes (switchable at any time, for every connection at once):

* ``pass``: forward both ways;
* ``stall``: forward nothing, keep every connection open (a frozen network);
* ``mute``: forward requests, throw replies away (a write lands, its answer
  never comes: the outcome is unknown to the client);
* ``cut``: close every connection now and refuse new ones until set back.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import Literal

Mode = Literal["pass", "stall", "mute", "cut"]
CHUNK = 65536
TICK_S = 0.05


class TcpProxy:
    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (host, upstream_port)
        self._listener = socket.create_server((host, 0))
        self._listener.settimeout(TICK_S)
        self.port: int = self._listener.getsockname()[1]
        self._mode: Mode = "pass"
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set(self, mode: Mode) -> None:
        with self._lock:
            self._mode = mode
            pairs = list(self._pairs) if mode == "cut" else []
        for pair in pairs:
            self._close(pair)

    def close(self) -> None:
        self._closed.set()
        self.set("cut")
        self._thread.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._mode == "cut":
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()  # the server is down: so is the connection
                continue
            pair = (client, upstream)
            with self._lock:
                self._pairs.append(pair)
            threading.Thread(target=self._pump, args=(pair,), daemon=True).start()

    def _pump(self, pair: tuple[socket.socket, socket.socket]) -> None:
        client, upstream = pair
        try:
            while not self._closed.is_set():
                if self._mode == "stall":
                    self._closed.wait(TICK_S)
                    continue
                readable, _, _ = select.select([client, upstream], [], [], TICK_S)
                for sock in readable:
                    data = sock.recv(CHUNK)
                    if not data:
                        return
                    if sock is client:
                        upstream.sendall(data)
                    elif self._mode != "mute":
                        client.sendall(data)
        except OSError:
            return
        finally:
            self._close(pair)

    def _close(self, pair: tuple[socket.socket, socket.socket]) -> None:
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)
        for sock in pair:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
