"""Errors raised across an actor boundary.

```text
ActorDeadError(RuntimeError)     tell/ask to a stopped actor; asks pending when it stopped
AskTimeoutError(TimeoutError)    no reply within the ask's liveness timeout
DeadlineExceeded(TimeoutError)   a handler's `promise.within(seconds)` passed on the system's clock
```
A handler's own exception reaches an asker unchanged.
"""

from __future__ import annotations

__all__ = ["ActorDeadError", "AskTimeoutError", "DeadlineExceeded"]


class ActorDeadError(RuntimeError):
    """The actor has stopped (or is stopping): it takes no more messages."""


class AskTimeoutError(TimeoutError):
    """An ask got no reply within its timeout (a liveness guard in real seconds)."""


class DeadlineExceeded(TimeoutError):
    """A handler's deadline (`Promise.within`) passed on the system's clock first.

    The promise it waited for is unchanged: the handler may await it again.
    """
