"""The public surface of `actors` is exactly the documented one."""

from __future__ import annotations

import actors

DOCUMENTED = {
    "ActorSystem",
    "Actor",
    "ActorRef",
    "Dispatcher",
    "Clock",
    "SystemClock",
    "wall_ns",
    "wall_of",
    "ManualClock",
    "TimerHandle",
    "ActorDeadError",
    "AskTimeoutError",
    "DeadlineExceeded",
    "MailboxStats",
    "Promise",
}


def test_all_lists_exactly_the_documented_names() -> None:
    assert set(actors.__all__) == DOCUMENTED
    assert len(actors.__all__) == len(DOCUMENTED)
    for name in actors.__all__:
        assert getattr(actors, name).__module__.startswith("actors")


def test_error_tree() -> None:
    assert issubclass(actors.AskTimeoutError, TimeoutError)
    assert issubclass(actors.ActorDeadError, Exception)
    assert issubclass(actors.DeadlineExceeded, TimeoutError)


def test_runtime_never_imports_the_scheduler() -> None:
    import pathlib

    source = pathlib.Path(actors.__file__).parent
    for path in source.glob("*.py"):
        text = path.read_text()
        assert "import scheduler" not in text and "from scheduler" not in text, path
