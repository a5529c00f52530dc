"""What the API answers, as typed records. Each keeps the whole answer in ``raw`` for the
fields it does not name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

#: The states in which a workflow instance has ended.
WORKFLOW_ENDED = frozenset({"succeeded", "failed", "stopped"})

#: The states in which a task instance has ended.
TASK_ENDED = frozenset({"succeeded", "failed", "killed", "skipped"})


@dataclass
class TaskInstance:
    """A task instance, as a workflow instance's page of tasks or GET /task-instances/{id}
    show it."""

    id: int
    workflow_instance_id: int
    name: str
    type: str
    state: str
    attempt: int
    worker_id: Optional[str] = None
    output: Optional[str] = None
    error: Optional[str] = None
    end_reason: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "TaskInstance":
        return cls(id=int(d["id"]), workflow_instance_id=int(d.get("workflow_instance_id") or 0), name=str(d.get("name", "")),
                   type=str(d.get("type", "")), state=str(d.get("state", "")), attempt=int(d.get("attempt") or 0),
                   worker_id=d.get("worker_id"), output=d.get("output"), error=d.get("error"),
                   end_reason=d.get("end_reason"), raw=d)

    @property
    def ended(self) -> bool:
        """Whether the task has ended (succeeded, failed, killed or skipped)."""
        return self.state in TASK_ENDED


@dataclass
class WorkflowInstance:
    """A workflow instance with its tasks (all of them, read a page after another)."""

    id: int
    workflow_name: str
    workflow_version: int
    state: str
    params: Dict[str, Any] = field(default_factory=dict)
    error: Optional[str] = None
    end_reason: Optional[str] = None
    task_states: Dict[str, int] = field(default_factory=dict)
    tasks: List[TaskInstance] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any], tasks: Optional[List[TaskInstance]] = None) -> "WorkflowInstance":
        return cls(id=int(d["id"]), workflow_name=str(d.get("workflow_name", "")), workflow_version=int(d.get("workflow_version") or 0),
                   state=str(d.get("state", "")), params=dict(d.get("params") or {}), error=d.get("error"),
                   end_reason=d.get("end_reason"), task_states=dict(d.get("task_states") or {}),
                   tasks=tasks if tasks is not None else [TaskInstance.from_json(t) for t in d.get("tasks") or []], raw=d)

    @property
    def ended(self) -> bool:
        """Whether the instance has ended (succeeded, failed or stopped)."""
        return self.state in WORKFLOW_ENDED

    def task(self, name: str) -> TaskInstance:
        """Return the instance's task named name (the first, for a for-each's items); KeyError
        when it has none yet."""
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(name)


@dataclass
class Submitted:
    """A submission's answer: the instance, and whether an earlier submission with the same
    Idempotency-Key created it (``replayed``)."""

    id: int
    workflow_name: str
    workflow_version: int
    replayed: bool = False


@dataclass
class LogPart:
    """Part of an attempt's log: ``text`` from chunk ``first_seq`` to before ``next_seq``;
    ``running`` says whether more may come, ``task_state`` is the task's."""

    attempt: int
    first_seq: int
    next_seq: int
    text: str
    running: bool
    task_state: str
    earlier: bool = False

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "LogPart":
        return cls(attempt=int(d.get("attempt") or 0), first_seq=int(d.get("first_seq") or 0), next_seq=int(d.get("next_seq") or 0),
                   text=str(d.get("text") or ""), running=bool(d.get("running")), task_state=str(d.get("task_state", "")),
                   earlier=bool(d.get("earlier")))


@dataclass
class Event:
    """A change seen in a workflow instance: ``kind`` is "workflow" (the instance's state
    changed; ``task`` is None) or "task" (a task appeared or its state changed).
    ``previous_state`` is None for what was not seen before. ``workflow`` is the instance as
    read when the change was seen."""

    kind: str
    state: str
    previous_state: Optional[str]
    workflow: WorkflowInstance
    task: Optional[TaskInstance] = None


@dataclass
class Schedule:
    """A schedule, as GET /schedules lists it."""

    workflow: str
    enabled: bool
    cron: str
    next: List[str] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Schedule":
        return cls(workflow=str(d.get("workflow", d.get("name", ""))), enabled=bool(d.get("enabled")), cron=str(d.get("cron", "")),
                   next=[str(x) for x in d.get("next") or []], raw=d)
