"""zksched: a client of a zksched master's HTTP API.

    import zksched
    c = zksched.Client("http://127.0.0.1:5678")   # the token as the CLI finds it
    run = c.submit_file("examples/hello.yaml")
    print(c.wait(run.id).state)
"""

from .client import DEFAULT_SERVER, Client, __version__, find_token, state_dir
from .errors import (BadRequest, Conflict, Forbidden, NotFound, PayloadTooLarge, RateLimited, ServerError, TransportError,
                     Unauthorized, Unavailable, WaitTimeout, ZkschedError)
from .models import TASK_ENDED, WORKFLOW_ENDED, Event, LogPart, Schedule, Submitted, TaskInstance, WorkflowInstance

__all__ = [
    "DEFAULT_SERVER", "Client", "__version__", "find_token", "state_dir",
    "BadRequest", "Conflict", "Forbidden", "NotFound", "PayloadTooLarge", "RateLimited", "ServerError", "TransportError",
    "Unauthorized", "Unavailable", "WaitTimeout", "ZkschedError",
    "TASK_ENDED", "WORKFLOW_ENDED", "Event", "LogPart", "Schedule", "Submitted", "TaskInstance", "WorkflowInstance",
]
