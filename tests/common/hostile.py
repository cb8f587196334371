"""Hostile connections for the HTTP hardening test and benchmark (loopback only)."""
import socket
import threading


class HeldConnections:
    """`idle` silent connections and `slow` slowloris ones (a request head that never ends: one more header
    line every `drip` seconds). close() stops the drip and closes every socket."""

    def __init__(self, port, idle, slow, drip):
        self.sockets = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(idle)]
        self._slow = []
        for _ in range(slow):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            self._slow.append(s)
        self.sockets.extend(self._slow)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drip, args=(drip,), daemon=True)
        self._thread.start()

    def _drip(self, every):
        while not self._stop.wait(every):
            for s in self._slow:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass

    def close(self):
        self._stop.set()
        self._thread.join()
        for s in self.sockets:
            s.close()
