"""The documentation keeps up with the code: every public name has an API entry, every page is
reachable, and the README's two commands are the ones CI runs."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

import mbvi

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: public contract of DESIGN.md that lives below a module
CONTRACT_MEMBERS = ["render.snapshot", "render.animate", "render.show"]


def _api_targets() -> set[str]:
    text = (DOCS / "api.md").read_text()
    return set(re.findall(r"^::: ([\w.]+)", text, flags=re.M))


@pytest.mark.parametrize("name", sorted(set(mbvi.__all__) - {"__version__"}))
def test_every_public_name_is_in_the_api_reference(name: str) -> None:
    targets = _api_targets()
    if isinstance(getattr(mbvi, name), types.ModuleType):  # a module (render, plot): documented by its members
        assert any(t.startswith(f"mbvi.{name}") for t in targets), f"docs/api.md documents nothing of mbvi.{name}"
        return
    leaves = {t.rsplit(".", 1)[-1] for t in targets}
    assert f"mbvi.{name}" in targets or name in leaves, f"docs/api.md has no entry for mbvi.{name}"


@pytest.mark.parametrize("member", CONTRACT_MEMBERS)
def test_contract_members_below_modules_are_in_the_api_reference(member: str) -> None:
    assert f"mbvi.{member}" in _api_targets()


def test_every_api_target_resolves() -> None:
    import importlib

    for target in _api_targets():
        parts = target.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for attr in parts[i:]:
                obj = getattr(obj, attr)
            break
        else:
            pytest.fail(f"{target} does not resolve")


def test_every_page_in_the_nav_exists_and_every_page_is_in_the_nav() -> None:
    nav = re.findall(r":\s*([\w-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), flags=re.M)
    for page in nav:
        assert (DOCS / page).exists() or page == "gallery.md", f"mkdocs.yml lists missing page {page}"
    for page in DOCS.glob("*.md"):
        assert page.name in nav, f"docs/{page.name} is not in the mkdocs.yml nav"


def test_readme_commands_are_make_targets_and_ci_runs_the_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^make (\w+)\s", readme, flags=re.M)
    assert commands[:2] == ["demo", "test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in commands:
        assert re.search(rf"^{target}:", makefile, flags=re.M), f"Makefile has no target {target}"
    assert re.search(r"^make test$", (ROOT / ".ci" / "run").read_text(), flags=re.M)


def test_the_engine_field_page_is_generated_from_the_table() -> None:
    """docs/engine-fields.md is what ``python -m mbvi.engine.fields`` prints: the table is the one source."""
    from mbvi.engine import fields

    page = (DOCS / "engine-fields.md").read_text()
    assert page == fields.markdown(), (
        "docs/engine-fields.md is stale: run python -m mbvi.engine.fields > docs/engine-fields.md"
    )
