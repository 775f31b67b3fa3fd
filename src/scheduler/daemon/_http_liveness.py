"""Slow and stalled HTTP clients of the REST API: uvicorn's h11 protocol with two timers
more, so that one client cannot hold a connection (and the response it is being sent)
forever.

- A request's head must arrive within ``head_timeout`` (the daemon's ``--hello-timeout``)
  of the connection, or of the first byte after a response: a client that connects and
  says nothing, or sends its headers a byte at a time (slowloris), is cut off. uvicorn
  bounds only the wait between requests (``timeout_keep_alive``) and a head's size
  (``h11_max_incomplete_event_size``).
- A response the client does not read: asyncio pauses the protocol when the transport's
  buffer is full, and resumes it when the client has read it down to the low-water mark.
  Paused for ``write_timeout`` (the daemon's ``--write-timeout``), the connection is
  aborted, its buffer dropped: a client reading a large state dump or the event stream a
  byte a second no longer holds it. A client that keeps reading, however slowly, resumes
  the protocol now and then and is left alone.

Each cut is logged with the client's address and the reason.
"""

from __future__ import annotations

import asyncio
from typing import Any

from loguru import logger
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["TimedH11Protocol", "timed_protocol"]

_log = logger.bind(component="http")


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a timeout on a request's head and one on a stalled
    write (module docstring)."""

    head_timeout = 10.0
    write_timeout = 30.0
    _head_timer: asyncio.TimerHandle | None = None
    _write_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        client = self.client
        self._peer = f"{client[0]}:{client[1]}" if client else "?"
        self._arm_head()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self._between_requests():
            self._arm_head()  # the first byte of the next request
        super().data_received(data)
        if not self._between_requests():
            self._disarm_head()  # its head is in: the app has it

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head()
        self._disarm_write()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_timeout, self._write_stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._disarm_write()

    def _between_requests(self) -> bool:
        cycle = self.cycle
        return cycle is None or cycle.response_complete

    def _arm_head(self) -> None:
        self._disarm_head()
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_late)

    def _disarm_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _disarm_write(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        self._cut(f"no request within {self.head_timeout:g}s (the daemon's --hello-timeout)")

    def _write_stalled(self) -> None:
        self._write_timer = None
        self._cut(
            f"the client read nothing of the response for {self.write_timeout:g}s "
            "(the daemon's --write-timeout)"
        )

    def _cut(self, reason: str) -> None:
        _log.bind(peer=self._peer).info("cutting off HTTP client {}: {}", self._peer, reason)
        self.transport.abort()


def timed_protocol(head_timeout: float, write_timeout: float) -> type[TimedH11Protocol]:
    """``TimedH11Protocol`` with these timeouts, for ``uvicorn.Config(http=...)``."""
    namespace: dict[str, Any] = {"head_timeout": head_timeout, "write_timeout": write_timeout}
    return type("TimedH11Protocol", (TimedH11Protocol,), namespace)
