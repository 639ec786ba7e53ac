"""Every command shown in README.md and docs/*.md runs exactly as written (issue 11).

Each shell block (```bash, ```sh, ```console) of a page is read in order; every
``mbvi …`` line (``.venv/bin/mbvi …`` too, backslash continuations joined) runs
in a temporary directory holding a copy of ``scenes/`` and the scene files the
page defines (a ```python block whose first line is ``# NAME.py``), one
directory per page so that later commands find what earlier ones wrote.
``make …`` lines (CI runs make itself), ``pip install`` lines and the plugins'
``pytest plugins/…`` lines (``make test`` runs them) are skipped;
so are ``mbvi sweep --scheduler ADDRESS`` lines, which need a running Dask
cluster. Every other kind of line fails :func:`test_only_known_kinds_of_lines_are_skipped`.
The README's first Python scene runs too (``exec``, rendering into the
temporary directory).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: pages with commands; docs/gallery.md is generated (its commands are the scenes', run by the gallery)
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "gallery.md")]
#: pages whose commands take more than ~20 s on a 2-core machine (measured)
SLOW_PAGES = {"README.md", "getting-started.md"}
TIMEOUT = 900  # s per command: generous, a hang still ends
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
_SKIP = re.compile(r"^(make|pip|python -m pip|\.venv/bin/pip|\.venv/bin/python -m pip)\b")
#: pytest lines: the plugin packages' tests, which ``make test`` runs (testpaths = tests, plugins)
_PYTEST = re.compile(r"^(\.venv/bin/)?pytest plugins/[\w-]+$")


def shell_lines(text: str) -> list[str]:
    """Command lines of the shell blocks of a Markdown page, continuations joined, comments dropped."""
    out = []
    for lang, body in _FENCE.findall(text):
        if lang not in ("bash", "sh", "console", "shell"):
            continue
        joined = re.sub(r"\\\n\s*", " ", body)
        for line in joined.splitlines():
            line = line.strip()
            if lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            words = shlex.split(line, comments=True)
            if words:
                out.append(shlex.join(words))
    return out


def scene_files(text: str) -> dict[str, str]:
    """Python blocks that a page names as files (first line ``# name.py``)."""
    files = {}
    for lang, body in _FENCE.findall(text):
        first = body.splitlines()[0].strip() if body.strip() else ""
        m = re.fullmatch(r"#\s*([\w-]+\.py)", first)
        if lang == "python" and m and "/" not in m.group(1):
            files[m.group(1)] = body
    return files


def needs_a_cluster(args: list[str]) -> bool:
    """A command that talks to a Dask scheduler at a network address (no cluster in the test run)."""
    return any(a == "--scheduler" or a.startswith("--scheduler=") for a in args)


def mbvi_commands(lines: list[str]) -> list[list[str]]:
    """The ``mbvi`` command lines (argument lists without the program), except those needing a cluster."""
    cmds = []
    for line in lines:
        words = shlex.split(line)
        if words[0] in ("mbvi", ".venv/bin/mbvi") and not needs_a_cluster(words):
            cmds.append(words[1:])
    return cmds


def _workdir(tmp: Path, page: Path) -> Path:
    shutil.copytree(ROOT / "scenes", tmp / "scenes", ignore=shutil.ignore_patterns("__pycache__"))
    for name, body in scene_files(page.read_text()).items():
        (tmp / name).write_text(body)
    return tmp


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("MPLBACKEND", "Agg")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _page_params() -> list:
    params = []
    for page in PAGES:
        if not mbvi_commands(shell_lines(page.read_text())):
            continue
        marks = [pytest.mark.slow] if page.name in SLOW_PAGES else []
        params.append(pytest.param(page, id=page.name, marks=marks))
    return params


@pytest.mark.parametrize("page", _page_params())
def test_every_mbvi_command_of_a_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    work = _workdir(tmp_path, page)
    for args in mbvi_commands(shell_lines(page.read_text())):
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "mbvi", *args],
            cwd=work,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        took = time.perf_counter() - start
        print(f"{page.name}: mbvi {shlex.join(args)}  ({took:.1f} s)")
        assert proc.returncode == 0, f"{page.name}: `mbvi {shlex.join(args)}` failed:\n{proc.stderr}{proc.stdout}"


def test_only_known_kinds_of_lines_are_skipped() -> None:
    """Shell lines that are not mbvi commands are make or pip (run by CI and set-up), nothing else."""
    others = []
    for page in PAGES:
        for line in shell_lines(page.read_text()):
            first = shlex.split(line)[0]
            if first in ("mbvi", ".venv/bin/mbvi") or _SKIP.match(line):
                continue
            if _PYTEST.match(line):
                assert (ROOT / line.split()[-1]).is_dir(), f"{page.name}: {line}: no such plugin"
                continue
            others.append(f"{page.name}: {line}")
    assert not others, "shell lines this test does not run:\n" + "\n".join(others)


def test_the_pages_have_commands() -> None:
    """A control: the extraction finds the README's commands (a broken regex would pass everything)."""
    cmds = mbvi_commands(shell_lines((ROOT / "README.md").read_text()))
    assert ["integrators"] in cmds and any(c[:2] == ["run", "scenes/chain.py"] for c in cmds)


@pytest.mark.slow
def test_readme_first_scene_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text()
    blocks = [body for lang, body in _FENCE.findall(text) if lang == "python"]
    assert blocks, "README.md has no Python block"
    monkeypatch.chdir(tmp_path)
    for body in blocks:
        exec(compile(body, "README.md", "exec"), {"__name__": "__readme__"})
    assert (tmp_path / "pendulum.gif").stat().st_size > 1000
