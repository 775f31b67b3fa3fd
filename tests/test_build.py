"""The optional compiled build (setup.py, ``SCHEDULER_COMPILE=1``) names modules that exist.

A renamed or removed module would otherwise drop out of the compiled build silently (mypyc
is given paths). The build itself runs in ``nox -s tests_compiled``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def compiled_paths() -> list[str]:
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "COMPILED":
            paths: list[str] = ast.literal_eval(node.value)
            return paths
    raise AssertionError("setup.py has no COMPILED list")


def test_every_compiled_module_exists_once() -> None:
    paths = compiled_paths()
    assert paths, "the compiled build compiles nothing"
    assert len(set(paths)) == len(paths)
    missing = [p for p in paths if not (ROOT / "src" / p).is_file()]
    assert not missing, f"setup.py compiles modules that do not exist: {missing}"


def test_the_proxy_stays_pure() -> None:
    # The proxy checks SI values against their declared types; compiled, a wrongly typed
    # value raises TypeError at the first assignment instead of becoming a rejection.
    assert "scheduler/core/_proxy.py" not in compiled_paths()
