"""``python -m scheduler`` is the ``scheduler`` console script."""

from __future__ import annotations

from scheduler import tune_gc, tune_malloc
from scheduler.cli._app import main as run_cli


def main() -> int:
    """The console script: this process is the command line's own, so once the imports
    are done the garbage collector and malloc are tuned for the core (``scheduler.tune_gc``,
    ``scheduler.tune_malloc``)."""
    tune_gc()
    tune_malloc()
    return run_cli()


if __name__ == "__main__":
    raise SystemExit(main())
