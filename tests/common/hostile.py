"""Hostile connections for the HTTP hardening test and benchmark (loopback only)."""
import collections
import socket
import threading
import time


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


class SlowReaders:
    """`count` connections, opened `pace` seconds apart, that each send one GET of `path` (HTTP/1.1, keep-alive)
    and then read `rate` bytes a second each (0: never read), as a reader on a slow or hostile link would. A
    thread does the reading until close(). ended() says how each connection ended so far: "reset" (the server
    sent RST), "closed" (FIN), "open"; drain() reads what is left so that a reset behind unread data is seen too;
    statuses() counts the status codes of the answers begun (from what was read of them)."""

    def __init__(self, port, count, path, rate, headers="", pace=0.0):
        self.rate = rate
        self.received = 0
        self._state = {}
        self._first = {}
        self.sockets = []
        request = f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode()
        for i in range(count):
            if i and pace:
                time.sleep(pace)
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(request)
            s.setblocking(False)
            self.sockets.append(s)
            self._state[s] = "open"
            self._first[s] = b""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _take(self, s, limit):
        """Reads up to `limit` bytes without blocking; records a reset or a close."""
        if self._state[s] != "open":
            return 0
        try:
            data = s.recv(limit)
        except BlockingIOError:
            return 0
        except ConnectionResetError:
            self._state[s] = "reset"
            return 0
        except OSError:
            self._state[s] = "error"
            return 0
        if not data:
            self._state[s] = "closed"
        if len(self._first[s]) < 12:
            self._first[s] += data[:12]
        return len(data)

    def _read(self):
        while not self._stop.wait(1.0):
            if self.rate <= 0:
                continue
            with self._lock:
                for s in self.sockets:
                    self.received += self._take(s, self.rate)

    def drain(self):
        with self._lock:
            for s in self.sockets:
                while self._take(s, 1 << 20) > 0:
                    pass

    def statuses(self):
        with self._lock:
            return collections.Counter(f[9:12].decode(errors="replace") if len(f) >= 12 else "none"
                                       for f in self._first.values())

    def ended(self):
        with self._lock:
            return collections.Counter(self._state.values())

    def close(self):
        self._stop.set()
        self._thread.join()
        for s in self.sockets:
            s.close()
