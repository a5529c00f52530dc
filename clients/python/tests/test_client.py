"""The client against a real master and worker.

The e2e package's TestPythonClient starts them and runs these tests with ZKSCHED_TEST_SERVER
(the master's URL) and ZKSCHED_TEST_TOKEN (an admin token); without them the tests fail, so a
suite that forgot them does not pass by skipping.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import unittest
import uuid
from typing import Any, List, Optional, Tuple

import zksched

SERVER = os.environ.get("ZKSCHED_TEST_SERVER", "")
TOKEN = os.environ.get("ZKSCHED_TEST_TOKEN", "")


def client(server: str = "", token: Optional[str] = None, **kw: Any) -> zksched.Client:
    if not SERVER or not TOKEN:
        raise AssertionError("ZKSCHED_TEST_SERVER and ZKSCHED_TEST_TOKEN name the master to test against")
    return zksched.Client(server or SERVER, token=TOKEN if token is None else token, **kw)


def unique(prefix: str) -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


class DropFirstAnswer:
    """A TCP proxy to the master that passes the first connection's request on and closes the
    connection once the master answers, without passing the answer back: the answer lost on
    the way, after the master acted. Later connections pass whole."""

    def __init__(self, server: str) -> None:
        host, port = server.split("//", 1)[1].split(":")
        self.upstream = (host, int(port))
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.connections = 0
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            drop = self.connections == 1
            threading.Thread(target=self._serve, args=(conn, drop), daemon=True).start()

    def _serve(self, conn: socket.socket, drop: bool) -> None:
        up = socket.create_connection(self.upstream)

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while True:
                    b = src.recv(65536)
                    if not b:
                        break
                    dst.sendall(b)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pump, args=(conn, up), daemon=True).start()
        if drop:
            up.recv(1)  # the master has answered: it committed
            self.dropped += 1
            # shutdown, not only close: the pump blocked reading conn holds it open until woken.
            for s in (conn, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # the pump shut it first
                s.close()
            return
        pump(up, conn)
        conn.close()
        up.close()


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()

    def test_submit_file_wait_status_and_params(self) -> None:
        name = unique("py-params")
        yaml = ("name: %s\nparams:\n  who: world\n  n: {type: integer, default: 1}\ntasks:\n"
                "  - {name: greet, type: shell, command: 'echo hello $ZKSCHED_PARAM_who $ZKSCHED_PARAM_n'}\n") % name
        run = self.c.submit_file(yaml, params={"who": "python", "n": 3})
        self.assertEqual(run.workflow_name, name)
        self.assertFalse(run.replayed)
        wf = self.c.wait(run.id, timeout=60)
        self.assertEqual(wf.state, "succeeded")
        self.assertEqual(wf.task("greet").output, "hello python 3")
        self.assertEqual(self.c.status(run.id).params, {"who": "python", "n": "3"})
        self.assertEqual(self.c.task(wf.task("greet").id).state, "succeeded")
        self.assertIn(run.id, [w.id for w in self.c.workflows(name=name)])
        self.assertIn(name, [d["name"] for d in self.c.definitions()])

        again = self.c.submit(name, version=run.workflow_version)
        self.assertEqual(self.c.wait(again.id, timeout=60).task("greet").output, "hello world 1")

    def test_submit_a_file_by_path(self) -> None:
        name = unique("py-path")
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), name + ".yaml")
        with open(path, "w") as f:
            f.write("name: %s\ntasks:\n  - {name: a, type: noop}\n" % name)
        try:
            d = self.c.define(path)
            self.assertEqual((d["name"], d["version"]), (name, 1))
            self.assertEqual(self.c.define(path)["version"], 1, "the same file stores no new version")
            self.assertEqual(self.c.wait(self.c.submit(name).id, timeout=60).state, "succeeded")
        finally:
            os.remove(path)

    def test_errors_are_typed(self) -> None:
        with self.assertRaises(zksched.NotFound) as cm:
            self.c.status(999999999)
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(zksched.NotFound):
            self.c.submit(unique("py-missing"))

        name = unique("py-bad")
        self.c.define("name: %s\nparams: {region: eu}\ntasks:\n  - {name: a, type: noop}\n" % name)
        with self.assertRaises(zksched.BadRequest) as bad:
            self.c.submit(name, params={"regoin": "us"})
        self.assertIn('"regoin" is not a param of workflow %s' % name, bad.exception.message)
        with self.assertRaises(zksched.BadRequest) as bad:
            self.c.define("name: %s\ntasks: 3\n" % name)
        self.assertIn("the workflow file is rejected", bad.exception.message)

        with self.assertRaises(zksched.Unauthorized) as unauth:
            client(token="").status(1)
        self.assertEqual(unauth.exception.status, 401)

        run = self.c.submit(name)
        task = self.c.wait(run.id, timeout=60).task("a")
        with self.assertRaises(zksched.Conflict):
            self.c.kill(task.id)
        with self.assertRaises(zksched.Conflict):
            self.c.signal(task.id, "late")
        self.assertTrue(issubclass(zksched.Conflict, zksched.ZkschedError))

        with self.assertRaises(zksched.TransportError):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            zksched.Client("http://127.0.0.1:%d" % port, token="x", retries=1, backoff=0.01).status(1)

    def test_a_submission_retried_after_its_answer_was_lost_runs_once(self) -> None:
        name = unique("py-once")
        self.c.define("name: %s\ntasks:\n  - {name: a, type: noop}\n" % name)
        proxy = DropFirstAnswer(SERVER)
        try:
            run = client(server=proxy.url, backoff=0.05).submit(name)
        finally:
            proxy.close()
        self.assertEqual(proxy.dropped, 1)
        self.assertEqual(proxy.connections, 2, "the client sent the submission again")
        self.assertTrue(run.replayed, "the retry answered the first submission's instance")
        self.assertEqual([w.id for w in self.c.workflows(name=name)], [run.id])

        key = str(uuid.uuid4())
        first = self.c.submit(name, idempotency_key=key)
        second = self.c.submit(name, idempotency_key=key)
        self.assertEqual((second.id, second.replayed), (first.id, True))
        self.assertEqual(len(self.c.workflows(name=name)), 2)

    def test_a_post_whose_answer_was_lost_is_not_sent_again_unless_repeatable(self) -> None:
        name = unique("py-kill")
        run = self.c.submit_file("name: %s\ntasks:\n  - {name: a, type: wait, timeout: 1h}\n" % name)
        task = self._wait_for_task(run.id, "a", "waiting")
        proxy = DropFirstAnswer(SERVER)
        try:
            with self.assertRaises(zksched.TransportError):
                client(server=proxy.url, backoff=0.05).signal(task.id, "once")
        finally:
            proxy.close()
        self.assertEqual(proxy.connections, 1)
        self.assertEqual(self.c.wait(run.id, timeout=60).task("a").output, "once")

    def test_events_follow_log_and_signal(self) -> None:
        name = unique("py-events")
        yaml = ("name: %s\ntasks:\n"
                "  - {name: talk, type: shell, command: 'for i in 1 2 3; do echo line $i; sleep 0.5; done'}\n"
                "  - {name: approve, type: wait, timeout: 1h, depends-on: [talk]}\n"
                "  - {name: after, type: shell, command: 'echo approved', depends-on: [approve]}\n") % name
        run = self.c.submit_file(yaml)
        talk = self._wait_for_task(run.id, "talk", None)
        log = "".join(self.c.follow_log(talk.id, poll=0.1))
        self.assertEqual(log, "line 1\nline 2\nline 3\n")

        seen: List[Tuple[str, Optional[str], Optional[str], str]] = []
        signalled = False
        for ev in self.c.events(run.id, poll=0.1, timeout=60):
            seen.append((ev.kind, ev.task.name if ev.task else None, ev.previous_state, ev.state))
            if ev.task is not None and ev.task.name == "approve" and ev.state == "waiting" and not signalled:
                self.assertEqual(self.c.signal(ev.task.id, "ok by python")["state"], "succeeded")
                signalled = True
        self.assertTrue(signalled, seen)
        self.assertEqual(seen[-1][0], "workflow")
        self.assertEqual(seen[-1][3], "succeeded")
        self.assertIn(("task", "approve", "waiting", "succeeded"), seen)
        self.assertEqual([s[3] for s in seen if s[1] == "after"][-1], "succeeded")
        wf = self.c.status(run.id)
        self.assertEqual(wf.task("approve").output, "ok by python")
        self.assertEqual(wf.task("after").output, "approved")
        self.assertEqual(self.c.log(wf.task("after").id).text, "approved\n")

    def test_signal_fail_kill_rerun_and_stop(self) -> None:
        name = unique("py-act")
        run = self.c.submit_file("name: %s\ntasks:\n  - {name: gate, type: wait, timeout: 1h}\n"
                                 "  - {name: long, type: shell, command: 'sleep 60'}\n" % name)
        gate = self._wait_for_task(run.id, "gate", "waiting")
        self.assertEqual(self.c.signal(gate.id, "no", fail=True)["state"], "failed")
        long = self._wait_for_task(run.id, "long", "running")
        self.assertEqual(self.c.kill(long.id)["state"], "running", "a running task's kill is requested")
        wf = self.c.wait(run.id, timeout=60)
        self.assertEqual((wf.state, wf.task("gate").state, wf.task("long").state), ("failed", "failed", "killed"))

        r = self.c.rerun_task(long.id)
        self.assertEqual((r["requeued"], r["reopened"]), ([long.id], True))
        self._wait_for_task(run.id, "long", "running")
        self.assertEqual(self.c.stop(run.id)["state"], "stopped")
        self.assertEqual(self.c.wait(run.id, timeout=60).state, "stopped")
        self._wait_for_task(run.id, "long", "killed")  # its worker stops it after the instance stops
        r = self.c.rerun(run.id)
        self.assertIn(long.id, r["requeued"])
        self.assertEqual(r["deleted_skipped"], 1, "the failed wait task is made again")
        self._wait_for_task(run.id, "gate", "waiting")
        self._wait_for_task(run.id, "long", "running")
        self.c.stop(run.id)
        self.assertEqual(self.c.wait(run.id, timeout=60).state, "stopped")
        with self.assertRaises(zksched.Conflict):
            self.c.stop(run.id)

    def test_kill_of_a_queued_task(self) -> None:
        name = unique("py-queued")
        run = self.c.submit_file("name: %s\ntasks:\n  - {name: hold, type: wait, timeout: 1h}\n"
                                 "  - {name: later, type: shell, command: 'true', group: nobody-serves-this}\n" % name)
        later = self._wait_for_task(run.id, "later", "queued")
        self.assertEqual(self.c.kill(later.id)["state"], "killed")
        self.assertEqual(list(self.c.follow_log(later.id)), [])

    def test_schedules(self) -> None:
        name = unique("py-sched")
        d = self.c.define("name: %s\nparams: {region: eu}\nschedule: {cron: '@yearly'}\ntasks:\n"
                          "  - {name: a, type: shell, command: 'echo $ZKSCHED_PARAM_region $ZKSCHED_PARAM_fire_date'}\n" % name)
        self.assertIn("schedule", d)
        mine = [s for s in self.c.schedules(next=2) if s.workflow == name]
        self.assertEqual(len(mine), 1)
        self.assertEqual((mine[0].enabled, mine[0].cron, len(mine[0].next)), (True, "@yearly", 2))
        self.assertFalse(self.c.pause_schedule(name)["enabled"])
        self.assertFalse([s for s in self.c.schedules() if s.workflow == name][0].enabled)
        self.assertTrue(self.c.resume_schedule(name)["enabled"])
        fired = self.c.trigger(name, params={"region": "us"})
        wf = self.c.wait(int(fired["id"]), timeout=60)
        self.assertEqual(wf.state, "succeeded")
        self.assertTrue(wf.task("a").output.startswith("us "), wf.task("a").output)
        with self.assertRaises(zksched.NotFound):
            self.c.trigger(unique("py-nosched"))

    def test_emit_asset(self) -> None:
        asset = unique("py-asset")
        name = unique("py-consumer")
        self.c.define("name: %s\non-assets: {all: [%s]}\ntasks:\n  - {name: a, type: noop}\n" % (name, asset))
        ev = self.c.emit_asset(asset, output="rows=3")
        self.assertEqual(ev["asset"], asset)
        deadline = time.monotonic() + 60
        while not self.c.workflows(name=name):
            self.assertLess(time.monotonic(), deadline, "the consumer did not start")
            time.sleep(0.2)
        self.assertEqual(self.c.wait(self.c.workflows(name=name)[0].id, timeout=60).state, "succeeded")

    def _wait_for_task(self, workflow_id: int, name: str, state: Optional[str]) -> zksched.TaskInstance:
        """The task once it exists (and is in state, unless None)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                t = self.c.status(workflow_id).task(name)
                if state is None or t.state == state:
                    return t
            except KeyError:
                pass
            self.assertLess(time.monotonic(), deadline, "task %s of %d never %s" % (name, workflow_id, state or "created"))
            time.sleep(0.1)


class TokenTest(unittest.TestCase):
    """Where a client finds its token when given none: as the CLI does."""

    def test_find_token(self) -> None:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "zksched"))
            with open(os.path.join(d, "zksched", "api-token"), "w") as f:
                f.write("from-state-dir\n")
            self.assertEqual(zksched.find_token(env={"XDG_STATE_HOME": d}), "from-state-dir")
            self.assertEqual(zksched.find_token(env={"ZKSCHED_NODE_STATE_DIR": os.path.join(d, "zksched")}), "from-state-dir")
            self.assertEqual(zksched.find_token(env={"ZKSCHED_TOKEN": "from-env", "XDG_STATE_HOME": d}), "from-env")
            self.assertIsNone(zksched.find_token(env={"HOME": d}))
            path = os.path.join(d, "token")
            with open(path, "w") as f:
                f.write("from-file\n")
            self.assertEqual(zksched.find_token(path, env={"ZKSCHED_TOKEN": "from-env"}), "from-file")
        with self.assertRaises(ValueError):
            zksched.Client("ftp://x")


if __name__ == "__main__":
    unittest.main()
