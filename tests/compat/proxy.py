"""A TCP proxy in front of a broker whose connections a test can cut at any moment, as a
network failure would: every open connection is reset (RST) at once, and clients reconnect
through the proxy. It can also lose the broker's responses for a while before the cut, so the
requests sent meanwhile reach the broker but are never answered: the client must retry them."""

import socket
import struct
import threading
import time


class CuttingProxy:
    def __init__(self, upstream_port: int):
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.cuts = 0
        self._losing = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, responses: bool):
        try:
            while data := source.recv(65536):
                if responses and self._losing.is_set():
                    continue
                target.sendall(data)
        except OSError:
            pass
        for s in (source, target):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        """Resets every connection open now."""
        with self._lock:
            doomed, self._sockets = self._sockets, []
        for s in doomed:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.shutdown(socket.SHUT_RDWR)  # wakes the pump blocked reading it
            except OSError:
                pass
            s.close()
        self.cuts += 1

    def lose_responses_then_cut(self, seconds: float):
        """Drops every response for `seconds`, then resets every connection."""
        self._losing.set()
        time.sleep(seconds)
        self.cut()
        self._losing.clear()

    def close(self):
        self._listener.close()
        self.cut()
