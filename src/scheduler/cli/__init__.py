"""The command line: ``scheduler`` (``python -m scheduler``).

What it holds: the commands (``_app``: ``serve``, ``check-config``, ``demo`` and
``simulate`` (``_simulate``),
with typer and rich; the CLI owns the terminal and turns the library's logging on) and the
demo's scenario (``_demo``).

It is the top room: it may import the public doors (``scheduler``, ``scheduler.client``,
``scheduler.testing``), the daemon, the core through its package (``scheduler.core``),
``scheduler.config``, ``scheduler.si`` and ``scheduler._errors``; nothing imports it but
``scheduler.__main__``.
"""
