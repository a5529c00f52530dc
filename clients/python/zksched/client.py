"""The client of a zksched master's HTTP API (/api/v1)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from .errors import TransportError, WaitTimeout, ZkschedError, error_for
from .models import Event, LogPart, Schedule, Submitted, TaskInstance, WorkflowInstance

__version__ = "0.1.0"

#: The master a client talks to when neither its argument nor ZKSCHED_SERVER names one: the
#: quickstart's.
DEFAULT_SERVER = "http://127.0.0.1:5678"

PathOrText = Union[str, "os.PathLike[str]"]


def state_dir(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """Return the state folder a master of this user on this machine keeps its generated token
    in, as the zksched CLI finds it: ZKSCHED_NODE_STATE_DIR, else $XDG_STATE_HOME/zksched (an
    absolute XDG_STATE_HOME), else $HOME/.local/state/zksched; None when none applies."""
    env = os.environ if env is None else env
    d = env.get("ZKSCHED_NODE_STATE_DIR", "")
    if d:
        return d
    d = env.get("XDG_STATE_HOME", "")
    if os.path.isabs(d):
        return os.path.join(d, "zksched")
    h = env.get("HOME", "")
    if os.path.isabs(h):
        return os.path.join(h, ".local", "state", "zksched")
    return None


def find_token(token_file: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """Return the token the zksched CLI would send: the content of token_file, else of the
    ZKSCHED_TOKEN variable, else of the api-token file a master of this user generated in its
    state folder (state_dir); None when there is none (an unreadable file counts as none: the
    master then answers 401)."""
    env = os.environ if env is None else env
    if token_file:
        with open(token_file, encoding="utf-8") as f:
            token = f.read().strip()
        if not token:
            raise ValueError("token file %s is empty" % token_file)
        return token
    token = env.get("ZKSCHED_TOKEN", "")
    if token:
        return token
    d = state_dir(env)
    if d:
        try:
            with open(os.path.join(d, "api-token"), encoding="utf-8") as f:
                return f.read().strip() or None
        except OSError:
            return None
    return None


def _text(v: Any) -> str:
    """A param's value as the API takes it: text; booleans as true and false."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _workflow_file(workflow: PathOrText) -> bytes:
    """The text of a workflow file given as its YAML (a string with a newline) or its path."""
    if isinstance(workflow, str) and "\n" in workflow:
        return workflow.encode("utf-8")
    with open(workflow, "rb") as f:
        return f.read()


class _NotSent(Exception):
    """The request did not leave: the master refused the connection or has no address."""


class Client:
    """A client of one master's API, acting as the user of its token.

    server is the master's URL (default: ZKSCHED_SERVER, else http://127.0.0.1:5678); token
    the bearer token (default: find_token(token_file), as the CLI finds it). A request that
    gets no answer because the connection could not be made, or a 429 or 503 answer, is sent
    again up to ``retries`` times, after the answer's Retry-After or a growing pause. A request
    whose answer was lost after it was sent is sent again only when a repeat does nothing
    more: reads, definitions (the same file stores no new version), schedule switches, and
    submissions, which carry an Idempotency-Key the master honours.
    """

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None, token_file: Optional[str] = None,
                 timeout: float = 30.0, retries: int = 4, backoff: float = 0.2, max_backoff: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        server = server or os.environ.get("ZKSCHED_SERVER") or DEFAULT_SERVER
        u = urllib.parse.urlsplit(server)
        if u.scheme not in ("http", "https") or not u.netloc or u.query or u.fragment:
            raise ValueError("server %r: want a master's URL, such as http://master-1:5678" % server)
        self.server = server.rstrip("/")
        self.token = token if token is not None else find_token(token_file)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep

    # The transport.

    def _send(self, method: str, url: str, data: Optional[bytes], headers: Dict[str, str]) -> Tuple[int, Mapping[str, str], bytes]:
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.headers, e.read()
        except urllib.error.URLError as e:
            if isinstance(e.reason, (ConnectionRefusedError, socket.gaierror)):
                raise _NotSent(str(e.reason)) from e
            raise

    def request(self, method: str, path: str, body: Any = None, *, data: Optional[bytes] = None,
                content_type: Optional[str] = None, query: Optional[Mapping[str, Any]] = None,
                idempotency_key: Optional[str] = None, repeatable: bool = False) -> Tuple[int, Any]:
        """Send a request to the API (path under /api/v1, such as "/schedules") and return the
        answer's status and its decoded JSON. body is sent as JSON, data as it is with
        content_type. repeatable says whether the request may be sent again after its answer
        was lost (GETs always are). An answer above 299 raises the error of its status."""
        url = self.server + "/api/v1" + path
        if query:
            q = {k: _text(v) for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        headers = {"Accept": "application/json", "User-Agent": "zksched-python/" + __version__}
        if body is not None:
            data, content_type = json.dumps(body).encode("utf-8"), "application/json"
        if content_type:
            headers["Content-Type"] = content_type
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        repeatable = repeatable or method == "GET"
        pause = self.backoff
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                status, hdrs, raw = self._send(method, url, data, headers)
            except _NotSent as e:
                if last:
                    raise TransportError("master %s: %s" % (self.server, e)) from None
                self._sleep(pause)
                pause = min(pause * 2, self.max_backoff)
                continue
            except (OSError, http.client.HTTPException) as e:
                # Sent, and no answer came: the master may have acted.
                if last or not repeatable:
                    raise TransportError("master %s: %s %s: no answer: %s" % (self.server, method, path, e)) from None
                self._sleep(pause)
                pause = min(pause * 2, self.max_backoff)
                continue
            if status < 300:
                return status, json.loads(raw) if raw else None
            retry_after = _retry_after(hdrs.get("Retry-After"))
            again = status in (429, 503) or (status in (502, 504) and repeatable)
            if again and not last and (retry_after is None or retry_after <= self.max_backoff * 6):
                self._sleep(retry_after if retry_after is not None else pause)
                pause = min(pause * 2, self.max_backoff)
                continue
            raise _error(status, raw, retry_after)
        raise AssertionError("unreachable")

    def _get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)[1]

    def _post(self, path: str, body: Any = None, repeatable: bool = False) -> Any:
        return self.request("POST", path, body, repeatable=repeatable)[1]

    # Definitions and submissions.

    def define(self, workflow: PathOrText) -> Dict[str, Any]:
        """Store a workflow file (its YAML text, or its path) as a new version of its
        definition, unless the latest version is the same; return {"name", "version",
        "schedule"?}. A file that does not parse is a BadRequest saying why."""
        return self.request("POST", "/definitions", data=_workflow_file(workflow), content_type="application/yaml",
                            repeatable=True)[1]

    def definitions(self) -> List[Dict[str, Any]]:
        """Every definition's name with its latest version, a page after another."""
        out: List[Dict[str, Any]] = []
        after: Optional[str] = None
        while True:
            page = self._get("/definitions", after=after, limit=1000)
            out.extend(page.get("items") or [])
            after = page.get("next")
            if not after:
                return out

    def submit(self, name: str, params: Optional[Mapping[str, Any]] = None, version: Optional[int] = None,
               priority: Optional[int] = None, idempotency_key: Optional[str] = None) -> Submitted:
        """Run the stored definition name (its latest version unless version) with params,
        each a text (numbers and booleans are written as text). The request carries an
        Idempotency-Key (idempotency_key, else a new one), so that its retries after a lost
        answer create one instance; a repeat with the same key answers the first's instance,
        ``replayed``. Params the workflow does not declare are a BadRequest listing them."""
        body: Dict[str, Any] = {"name": name}
        if params:
            body["params"] = {k: _text(v) for k, v in params.items()}
        if version:
            body["version"] = version
        if priority is not None:
            body["priority"] = priority
        _, d = self.request("POST", "/workflow-instances", body, idempotency_key=idempotency_key or str(uuid.uuid4()),
                            repeatable=True)
        return Submitted(id=int(d["id"]), workflow_name=str(d["workflow_name"]), workflow_version=int(d["workflow_version"]),
                         replayed=bool(d.get("replayed")))

    def submit_file(self, workflow: PathOrText, params: Optional[Mapping[str, Any]] = None, priority: Optional[int] = None,
                    idempotency_key: Optional[str] = None) -> Submitted:
        """Store a workflow file (its YAML text, or its path) and run the version stored, as
        ``zksched submit FILE`` does: define, then submit."""
        d = self.define(workflow)
        return self.submit(d["name"], params, version=int(d["version"]), priority=priority, idempotency_key=idempotency_key)

    # Reading instances.

    def status(self, workflow_id: int) -> WorkflowInstance:
        """Return a workflow instance with all its tasks."""
        d = self._get("/workflow-instances/%d" % workflow_id, limit=1000)
        tasks = [TaskInstance.from_json(t) for t in d.get("tasks") or []]
        after = d.get("tasks_next")
        while after:
            p = self._get("/workflow-instances/%d" % workflow_id, limit=1000, after=after)
            tasks.extend(TaskInstance.from_json(t) for t in p.get("tasks") or [])
            after = p.get("tasks_next")
        return WorkflowInstance.from_json(d, tasks)

    def workflows(self, state: Optional[str] = None, name: Optional[str] = None, limit: Optional[int] = None) -> List[WorkflowInstance]:
        """The newest workflow instances (a page of limit, 50 by default), without their tasks."""
        page = self._get("/workflow-instances", state=state, name=name, limit=limit)
        return [WorkflowInstance.from_json(w, []) for w in page.get("items") or []]

    def task(self, task_id: int) -> TaskInstance:
        """Return a task instance; its ``raw`` has its attempts, checkpoints and log tail."""
        return TaskInstance.from_json(self._get("/task-instances/%d" % task_id))

    def events(self, workflow_id: int, poll: float = 0.2, max_poll: float = 2.0,
               timeout: Optional[float] = None) -> Iterator[Event]:
        """Yield the changes of a workflow instance until it ends: first its state and each
        task's as they are, then every task that appears or changes state, and the instance's
        own changes, the instance's end last. The API has no event stream: this reads the
        instance every poll seconds, the pause growing to max_poll while nothing changes, so
        states a task passes through between two reads are not seen (queued then succeeded).
        Past timeout seconds it raises WaitTimeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen: Dict[int, str] = {}
        state: Optional[str] = None
        pause = poll
        while True:
            wf = self.status(workflow_id)
            changed = False
            for t in wf.tasks:
                prev = seen.get(t.id)
                if prev != t.state:
                    seen[t.id] = t.state
                    changed = True
                    yield Event(kind="task", state=t.state, previous_state=prev, workflow=wf, task=t)
            if wf.state != state:
                prev_wf, state, changed = state, wf.state, True
                yield Event(kind="workflow", state=wf.state, previous_state=prev_wf, workflow=wf)
            if wf.ended:
                return
            pause = poll if changed else min(pause * 1.5, max_poll)
            if deadline is not None and time.monotonic() + pause > deadline:
                raise WaitTimeout("workflow instance %d is still %s after %gs" % (workflow_id, wf.state, timeout))
            self._sleep(pause)

    def wait(self, workflow_id: int, timeout: Optional[float] = None, poll: float = 0.2, max_poll: float = 2.0) -> WorkflowInstance:
        """Wait until a workflow instance ends and return it (succeeded, failed or stopped: a
        failure is an answer, not an error). Past timeout seconds it raises WaitTimeout."""
        last: Optional[WorkflowInstance] = None
        for ev in self.events(workflow_id, poll=poll, max_poll=max_poll, timeout=timeout):
            last = ev.workflow
        assert last is not None
        return last

    # Logs.

    def log(self, task_id: int, attempt: Optional[int] = None, tail_bytes: Optional[int] = None) -> LogPart:
        """The end of an attempt's log (the latest attempt unless attempt; 64 KiB unless
        tail_bytes)."""
        return LogPart.from_json(self._get("/task-instances/%d/log" % task_id, attempt=attempt, tail_bytes=tail_bytes))

    def follow_log(self, task_id: int, attempt: Optional[int] = None, poll: float = 0.5) -> Iterator[str]:
        """Yield an attempt's log from its start, a piece of text at a time, until the attempt
        has ended (``zksched logs -f``): a task still queued is waited for, and its first
        attempt followed; a task that will never run (skipped, killed while queued) yields
        nothing."""
        seq = 0
        while True:
            p = LogPart.from_json(self._get("/task-instances/%d/log" % task_id, attempt=attempt, from_seq=seq))
            if p.text:
                yield p.text
            if p.attempt == 0 and p.task_state != "queued":
                return
            if p.attempt > 0:
                if not p.running:
                    return
                attempt, seq = p.attempt, p.next_seq
            self._sleep(poll)

    # Acting on instances.

    def kill(self, task_id: int) -> Dict[str, Any]:
        """Kill a task instance: a queued one at once ("state": "killed"), a running one by its
        worker ("state": "running", kill requested). Conflict once it has ended."""
        return self._post("/task-instances/%d/kill" % task_id)

    def rerun_task(self, task_id: int) -> Dict[str, Any]:
        """Queue a failed or killed task again, reopening its workflow instance."""
        return self._post("/task-instances/%d/rerun" % task_id)

    def rerun(self, workflow_id: int) -> Dict[str, Any]:
        """Rerun a workflow instance from its failed and killed tasks."""
        return self._post("/workflow-instances/%d/rerun" % workflow_id)

    def stop(self, workflow_id: int) -> Dict[str, Any]:
        """Stop a workflow instance: its queued tasks are killed, its running ones stopped."""
        return self._post("/workflow-instances/%d/stop" % workflow_id)

    def signal(self, task_id: int, output: str = "", fail: bool = False) -> Dict[str, Any]:
        """End a waiting task (type: wait) with output, succeeded, or failed with output as its
        error when fail; resume a paused agent. Conflict when it is not waiting."""
        return self._post("/task-instances/%d/signal" % task_id, {"output": output, "fail": fail})

    # Schedules and assets.

    def schedules(self, next: Optional[int] = None) -> List[Schedule]:
        """Every schedule, with its next fire times (3 unless next)."""
        return [Schedule.from_json(s) for s in self._get("/schedules", next=next).get("schedules") or []]

    def trigger(self, workflow: str, params: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Run a schedule's workflow now, with its defaults, the fire's fire_time and fire_date,
        and params; return {"id", "workflow_name", "fire_time"}."""
        body = {"params": {k: _text(v) for k, v in params.items()}} if params else None
        return self._post("/schedules/%s/trigger" % urllib.parse.quote(workflow, safe=""), body)

    def pause_schedule(self, workflow: str) -> Dict[str, Any]:
        """Switch a schedule off (until its file is stored again)."""
        return self._post("/schedules/%s/disable" % urllib.parse.quote(workflow, safe=""), repeatable=True)

    def resume_schedule(self, workflow: str) -> Dict[str, Any]:
        """Switch a schedule on."""
        return self._post("/schedules/%s/enable" % urllib.parse.quote(workflow, safe=""), repeatable=True)

    def emit_asset(self, asset: str, output: Optional[str] = None) -> Dict[str, Any]:
        """Emit an event of an asset, starting the workflows whose on-assets it completes;
        return {"asset", "event"}."""
        body = {"output": output} if output is not None else None
        return self._post("/assets/%s/events" % urllib.parse.quote(asset, safe=""), body)


def _retry_after(v: Optional[str]) -> Optional[float]:
    if not v:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        return None


def _error(status: int, raw: bytes, retry_after: Optional[float]) -> ZkschedError:
    body: Optional[Dict[str, Any]] = None
    message = ""
    try:
        decoded = json.loads(raw)
        if isinstance(decoded, dict):
            body = decoded
            err = decoded.get("error")
            if isinstance(err, dict):
                message = str(err.get("message", ""))
    except ValueError:
        pass
    if not message:
        message = raw[:200].decode("utf-8", "replace").strip() or "no message"
    return error_for(status, message, body, retry_after)
