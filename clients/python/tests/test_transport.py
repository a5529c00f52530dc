"""The client's retries and errors against a local stand-in that answers as a master would
when it refuses: no master needed."""

from __future__ import annotations

import http.server
import json
import threading
import unittest
from typing import Any, Dict, List, Optional, Tuple

import zksched

Answer = Tuple[int, Dict[str, str], Dict[str, Any]]


class StandIn:
    """An HTTP server answering each request with the next of answers, recording requests."""

    def __init__(self, answers: List[Answer]) -> None:
        self.answers = list(answers)
        self.requests: List[Tuple[str, str, Dict[str, str], Optional[bytes]]] = []
        stand_in = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                stand_in.requests.append((self.command, self.path, dict(self.headers), body))
                status, headers, payload = stand_in.answers.pop(0)
                raw = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def refusal(status: int, message: str, headers: Optional[Dict[str, str]] = None) -> Answer:
    return status, headers or {}, {"error": {"status": status, "message": message}}


class TransportTest(unittest.TestCase):
    def stand_in(self, answers: List[Answer]) -> Tuple[StandIn, zksched.Client, List[float]]:
        s = StandIn(answers)
        self.addCleanup(s.close)
        pauses: List[float] = []
        return s, zksched.Client(s.url, token="t0ken", retries=2, sleep=pauses.append), pauses

    def test_errors_by_status(self) -> None:
        for status, cls in [(400, zksched.BadRequest), (401, zksched.Unauthorized), (403, zksched.Forbidden),
                            (404, zksched.NotFound), (409, zksched.Conflict), (413, zksched.PayloadTooLarge),
                            (500, zksched.ServerError), (418, zksched.ZkschedError)]:
            _, c, _ = self.stand_in([refusal(status, "why %d" % status)])
            with self.assertRaises(cls) as cm:
                c.kill(1)
            self.assertEqual((cm.exception.status, cm.exception.message), (status, "why %d" % status))
            self.assertIsInstance(cm.exception, zksched.ZkschedError)

    def test_rate_limited_is_retried_after_retry_after(self) -> None:
        s, c, pauses = self.stand_in([refusal(429, "slow down", {"Retry-After": "3"}),
                                      refusal(503, "busy", {"Retry-After": "1"}),
                                      (201, {}, {"id": 7, "workflow_name": "w", "workflow_version": 2})])
        run = c.submit("w", params={"n": 1, "dry": True}, idempotency_key="k")
        self.assertEqual((run.id, run.workflow_version, run.replayed), (7, 2, False))
        self.assertEqual(pauses, [3.0, 1.0])
        keys = {r[2].get("Idempotency-Key") for r in s.requests}
        self.assertEqual(keys, {"k"}, "every try carries the one key")
        self.assertEqual(json.loads(s.requests[0][3] or b""), {"name": "w", "params": {"n": "1", "dry": "true"}})
        self.assertEqual(s.requests[0][2].get("Authorization"), "Bearer t0ken")

    def test_rate_limited_past_the_retries(self) -> None:
        _, c, pauses = self.stand_in([refusal(429, "slow down", {"Retry-After": "2"})] * 3)
        with self.assertRaises(zksched.RateLimited) as cm:
            c.schedules()
        self.assertEqual(cm.exception.retry_after, 2.0)
        self.assertEqual(pauses, [2.0, 2.0])

    def test_a_long_retry_after_is_not_waited(self) -> None:
        _, c, pauses = self.stand_in([refusal(503, "down", {"Retry-After": "3600"})])
        with self.assertRaises(zksched.Unavailable) as cm:
            c.status(1)
        self.assertEqual((cm.exception.retry_after, pauses), (3600.0, []))


if __name__ == "__main__":
    unittest.main()
