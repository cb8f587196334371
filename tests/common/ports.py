"""Loopback ports for the Python test harnesses (lab, monitoring, alerting)."""
import socket

_given = set()


def free_port():
    """A free loopback port not handed out before by this process: the kernel may return the same
    ephemeral port to two bind(0) calls in a row once the first socket is closed, and two servers
    (or QEMU's forwarding rules) on one port fail to start."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given:
            _given.add(port)
            return port
