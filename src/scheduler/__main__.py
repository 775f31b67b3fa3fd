"""``python -m scheduler`` is the ``scheduler`` console script."""

from __future__ import annotations

from scheduler._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
