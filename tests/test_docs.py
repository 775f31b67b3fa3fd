"""The API reference in docs/api/ names every public name, and nothing else.

Each page renders modules with mkdocstrings: ``::: module`` with an explicit ``members``
list, or ``::: module.Name`` for one name. The names come from the pages and ``__all__``
is read at run time, so a public name added without a place in the reference fails here
(``nox -s docs`` then checks that the reference builds without a warning).
"""

from __future__ import annotations

import importlib
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"
PUBLIC_MODULES = ("scheduler", "scheduler.si", "scheduler.testing", "scheduler.client", "actors")

# A mkdocstrings block: the ``:::`` line and the indented YAML options under it.
BLOCK = re.compile(r"^::: *(?P<target>[\w.]+) *\n(?P<options>(?:(?: {4}.*)?\n)*)", re.M)


def documented_names() -> dict[str, list[str]]:
    """Each public module's names as the pages of docs/api/ render them, in page order."""
    names: dict[str, list[str]] = {module: [] for module in PUBLIC_MODULES}
    for page in sorted(API.glob("*.md")):
        for block in BLOCK.finditer(page.read_text()):
            target = block["target"]
            if target in names:
                options: dict[str, Any] = (
                    yaml.safe_load(textwrap.dedent(block["options"])) or {}
                ).get("options") or {}
                members = options.get("members")
                if isinstance(members, list):
                    names[target].extend(members)
            else:
                module, _, name = target.rpartition(".")
                assert module in names, f"{page.name}: {target} is not in a public module"
                names[module].append(name)
    return names


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_the_reference_lists_exactly_the_public_names(module_name: str) -> None:
    public = list(importlib.import_module(module_name).__all__)
    documented = documented_names()[module_name]
    missing = sorted(set(public) - set(documented))
    unknown = sorted(set(documented) - set(public))
    assert not missing, f"public names of {module_name} missing from docs/api/: {missing}"
    assert not unknown, f"docs/api/ documents names {module_name} does not export: {unknown}"
    assert len(documented) == len(set(documented)), f"{module_name}: a name documented twice"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_class_and_function_has_a_docstring_of_its_own(module_name: str) -> None:
    module = importlib.import_module(module_name)
    undocumented = [
        name
        for name in module.__all__
        if (inspect.isclass(obj := getattr(module, name)) or inspect.isfunction(obj))
        and not (vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__)
    ]
    assert not undocumented, f"{module_name}: no docstring on {undocumented}"


def test_every_api_page_is_in_the_site_navigation() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(nav: Any) -> set[str]:
        if isinstance(nav, str):
            return {nav}
        if isinstance(nav, list):
            return set().union(*(pages(item) for item in nav))
        if isinstance(nav, dict):
            return set().union(*(pages(value) for value in nav.values()))
        return set()

    listed = pages(config["nav"])
    assert {f"api/{page.name}" for page in API.glob("*.md")} <= listed
