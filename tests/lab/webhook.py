#!/usr/bin/env python3
"""Alertmanager webhook receiver for the lab.

Records every alert notification with the host time it arrived, which is the
end point of the lab's detection-latency measurement. Used in-process by
lab.py (WebhookServer) or standalone for poking at Alertmanager by hand:

    tests/lab/webhook.py --port 9099 --log /tmp/alerts.jsonl
"""
import argparse
import http.server
import json
import threading
import time


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server naming)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        arrived = time.time()
        try:
            payload = json.loads(body)
        except ValueError:
            payload = {"unparsable": body.decode("utf-8", "replace")}
        self.server.record(arrived, payload)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, fmt, *args):
        # Quiet: the lab prints its own summary; per-request lines are noise.
        pass


class WebhookServer(http.server.ThreadingHTTPServer):
    """Loopback-only HTTP server that keeps (arrival_time, alert) pairs."""

    daemon_threads = True

    def __init__(self, port=0, log_path=None):
        super().__init__(("127.0.0.1", port), _Handler)
        self.lock = threading.Lock()
        self.notifications = []  # (arrival_time, payload)
        self.log_path = log_path

    @property
    def port(self):
        return self.server_address[1]

    def record(self, arrived, payload):
        with self.lock:
            self.notifications.append((arrived, payload))
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(json.dumps({"arrived": arrived, "payload": payload}) + "\n")

    def alerts(self):
        """Flattened (arrival_time, status, labels) for every alert in every notification."""
        with self.lock:
            notes = list(self.notifications)
        out = []
        for arrived, payload in notes:
            for a in payload.get("alerts", []) if isinstance(payload, dict) else []:
                out.append((arrived, a.get("status"), a.get("labels", {})))
        return out

    def start(self):
        t = threading.Thread(target=self.serve_forever, name="webhook", daemon=True)
        t.start()
        return self


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=9099)
    ap.add_argument("--log", default=None, help="append notifications as JSON lines")
    args = ap.parse_args()
    srv = WebhookServer(args.port, args.log)
    print(f"webhook listening on 127.0.0.1:{srv.port}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
