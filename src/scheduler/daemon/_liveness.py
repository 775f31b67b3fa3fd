"""Slow and stalled peers: what the transports share so that an RM (or a gRPC stream) that
says nothing, reads nothing or vanished without a word is cut off after a bounded time
instead of holding the daemon's memory, tasks and sockets.

- TCP keepalive on the native transport's accepted sockets (``keep_alive``), so the kernel
  notices a host that vanished (no FIN) even while the daemon has nothing to send; the
  native session's own heartbeat (``Ping``/``Pong``, ``scheduler.daemon._native``) is what
  the daemon relies on, this is the floor under it.
- gRPC's keepalive, hello and write timeouts are in ``scheduler.daemon._grpc_liveness``
  (which loads grpc).
"""

from __future__ import annotations

import socket

from anyio.abc import ByteStream, SocketAttribute

__all__ = ["keep_alive"]

# Unanswered keepalive probes before the kernel drops the connection.
_PROBES = 3


def keep_alive(stream: ByteStream, idle_timeout: float) -> bool:
    """Turn on TCP keepalive on ``stream``'s socket: the first probe after a third of
    ``idle_timeout`` of silence, then ``_PROBES`` probes that far apart (and, on Linux,
    unacknowledged data for ``idle_timeout`` also ends it). False where there is no TCP
    socket (a Unix socket) or the platform says no."""
    try:
        sock: socket.socket = stream.extra(SocketAttribute.raw_socket)
    except Exception:
        return False
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    every = max(1, round(idle_timeout / 3))
    options = [
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPIDLE", None), every),  # Linux
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPALIVE", None), every),  # macOS
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPINTVL", None), every),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPCNT", None), _PROBES),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_USER_TIMEOUT", None), int(idle_timeout * 1000)),
    ]
    try:
        for level, name, value in options:
            if name is not None:
                sock.setsockopt(level, name, value)
    except OSError:
        return False
    return True
