"""``python -m scheduler`` is the ``scheduler`` console script."""

from __future__ import annotations

from scheduler import tune_gc
from scheduler.cli._app import main as run_cli


def main() -> int:
    """The console script: this process is the command line's own, so once the imports
    are done the garbage collector is tuned for the core (``scheduler.tune_gc``)."""
    tune_gc()
    return run_cli()


if __name__ == "__main__":
    raise SystemExit(main())
