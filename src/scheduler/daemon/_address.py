"""The addresses the daemon listens on, read before anything binds.

``host:port`` for ``--http`` and ``--grpc``, ``tcp://host:port`` or ``tls://host:port`` for
``--native``: a port is 0 (any free one) to 65535. A bad address is a ``SchedulerError``
that names the option, what is wrong and an example; a bind that fails (the port is taken)
is one that names the option and the address (``cannot_listen``).
"""

from __future__ import annotations

from scheduler._errors import SchedulerError

__all__ = ["cannot_listen", "host_port"]

_MAX_PORT = 65535


def host_port(
    option: str, hostport: str, example: str, address: str | None = None
) -> tuple[str, int]:
    """The host (an IPv6 one without its brackets) and port of ``hostport``.

    ``option``, ``example`` and ``address`` (the whole address given, when ``hostport`` is
    a part of it) are for the message: ``--grpc``, ``127.0.0.1:9090``.
    """
    address = hostport if address is None else address
    host, sep, port_text = hostport.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit():
        raise SchedulerError(f"{option} {address!r}: say host:port, e.g. {example}")
    port = int(port_text)
    if port > _MAX_PORT:
        raise SchedulerError(
            f"{option} {address!r}: the port must be 0 (any free port) to {_MAX_PORT}, "
            f"e.g. {example}"
        )
    return host, port


def cannot_listen(option: str, address: str, exc: OSError) -> SchedulerError:
    """The error for a listener that could not bind ``address``."""
    why = exc.strerror or str(exc)
    return SchedulerError(f"{option} {address}: cannot listen there: {why}")
