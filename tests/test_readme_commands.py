"""Every command and every Python block of README.md and docs/*.md runs exactly as written (issue 11).

Commands. Each shell block (```bash, ```sh, ```console) of a page is read in order; every
``mbvi …`` line (``.venv/bin/mbvi …`` too, backslash continuations joined) runs
in a temporary directory holding a copy of the repository files the pages read
(:data:`CLONE_FILES`: ``scenes/`` and the example URDF) and the scene files the
page defines (a ```python block whose first line is ``# NAME.py``), one
directory per page so that later commands find what earlier ones wrote.
``make …`` lines (CI runs make itself), ``pip install`` lines, the activation of
the set-up's environment (``. .venv/bin/activate``) and the plugins'
``pytest plugins/…`` lines (``make test`` runs them) are skipped;
so are ``mbvi sweep --scheduler ADDRESS`` lines, which need a running Dask
cluster. Every other kind of line fails :func:`test_only_known_kinds_of_lines_are_skipped`.

Python. Every ```python block of a page runs (``exec``) in such a temporary
directory, the blocks of one page in order and in one namespace, as a reader
following the page would run them; a block that names a file (first line
``# NAME.py``) runs in a namespace of its own, as the module it is (and, without
a ``/`` in the name, is written to the directory first). Tracebacks point at the
page's own lines. The only way to keep a block from running is a visible marker
in the Markdown, an HTML comment on the line before its fence (blank lines
allowed)::

    <!-- no-run: why this block cannot run here (e.g. it needs a SLURM cluster) -->

:data:`NO_RUN` lists how many such blocks each page has, and
:func:`test_no_run_markers_are_listed_and_bounded` fails when a marker is added,
removed or left without a reason, and when there are more than :data:`MAX_NO_RUN`.

Files. Whatever a page's commands or blocks write into the directory must be
ignored by the repository's ``.gitignore`` (checked with ``git check-ignore``),
so that a reader who follows the pages at the top of a clone leaves ``git status``
clean.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: pages with commands; docs/gallery.md is generated (its commands are the scenes', run by the gallery)
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "gallery.md")]
#: pages whose commands take more than ~20 s on a 2-core machine (measured)
SLOW_PAGES = {"README.md", "getting-started.md"}
#: pages whose Python blocks render animations (~10–30 s each on a shared 2-core machine, measured): with them the
#: whole run of the pages' Python would take more than a minute, so they run with the slow tests (``make test``)
SLOW_PYTHON_PAGES = {"README.md", "index.md", "getting-started.md", "rendering.md"}
#: repository files the pages read (scene files, the example URDF), copied into each page's directory
CLONE_FILES = ("scenes", "docs/notebooks/two_link_arm.urdf")
#: blocks marked ``<!-- no-run: reason -->``, by page; a marker added or removed must be accounted for here
NO_RUN = {
    "getting-started.md": 1,  # a long run stopped by Ctrl-C (tests/test_interrupts.py presses it)
    "lagrangian.md": 1,  # the LagrangianSystem template, placeholders for L, the coordinates, …
    "plugins-force-law.md": 3,  # lines of a law's __init__; check_force_law on placeholders; a kernel, its law elided
    "rendering.md": 1,  # render.show(): an interactive window (a display or Jupyter)
    "sweeps.md": 2,  # a SLURM cluster; a Dask scheduler at a network address
}
#: at most this many blocks of all pages may be kept from running
MAX_NO_RUN = 8
#: warnings a page's blocks emit on purpose, by page: (category, message) — the page shows the message;
#: any other warning fails the page (``filterwarnings = error``)
EXPECTED_WARNINGS = {
    "integrators.md": (
        RuntimeWarning,
        "integrator 'explicit_euler' at dt = 0.01 s: the energy balance E − E₀ − W gained 0.783 times the energy the "
        "run had to give at the start (it strayed by 0.229 J by t = 50 s); the result is not accurate (reduce dt, "
        "e.g. to 0.0025 s)",
    ),
    "plots.md": (
        RuntimeWarning,
        "integrator 'explicit_euler' at dt = 0.001 s: the energy balance E − E₀ − W gained 0.409 times the energy the "
        "run had to give at the start (it strayed by 12 J by t = 20 s); the result is not accurate (reduce dt, e.g. "
        "to 0.00025 s)",
    ),
    "robots.md": (
        UserWarning,
        "URDF 'two_link_arm': mbvi ignores visuals of links fixed to the world (base); joint limits (shoulder)",
    ),
}
#: languages of the fenced blocks; a Python block under another name (```py, ```pycon) would escape the test
LANGUAGES = {"", "python", "bash", "sh", "console", "shell", "text", "toml"}
TIMEOUT = 900  # s per command: generous, a hang still ends
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
_SKIP = re.compile(r"^(make|pip|python -m pip|\.venv/bin/pip|\.venv/bin/python -m pip)\b")
#: the activation of the environment ``make`` sets up (the test runs its own interpreter)
_ACTIVATE = re.compile(r"^(\.|source) \.venv/bin/activate$")
_OPEN = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)[^`]*$")
_CLOSE = re.compile(r"^ *```\s*$")
_NO_RUN = re.compile(r"^\s*<!--\s*no-run:(?P<reason>.*?)-->\s*$")
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
    """A directory like the top of a clone: the files of :data:`CLONE_FILES` and the page's scene files."""
    for rel in CLONE_FILES:
        src, dst = ROOT / rel, tmp / rel
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    for name, body in scene_files(page.read_text()).items():
        (tmp / name).write_text(body)
    return tmp


def _files(directory: Path) -> set[str]:
    """Every file below ``directory``, as a POSIX path relative to it."""
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if not p.is_dir()}


def not_ignored(paths: set[str]) -> list[str]:
    """The paths (relative to the top of a clone) that the repository's ``.gitignore`` files do not ignore."""
    if not paths:
        return []
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout to read .gitignore")
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin", "-z"],
        cwd=ROOT,
        input="\0".join(sorted(paths)) + "\0",
        capture_output=True,
        text=True,
    )
    assert proc.returncode in (0, 1), f"git check-ignore failed: {proc.stderr}"  # 1: none of them is ignored
    ignored = set(proc.stdout.split("\0"))
    return sorted(p for p in paths if p not in ignored)


def assert_written_files_are_ignored(page: Path, written: set[str]) -> None:
    """Files a page wrote at the top of a (temporary) clone must be git-ignored."""
    left = not_ignored(written)
    assert not left, f"{page.name} writes files that .gitignore does not ignore: {left}"


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
    before = _files(work)
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
    assert_written_files_are_ignored(page, _files(work) - before)


def test_only_known_kinds_of_lines_are_skipped() -> None:
    """Shell lines that are not mbvi commands are make or pip (run by CI and set-up), nothing else."""
    others = []
    for page in PAGES:
        for line in shell_lines(page.read_text()):
            first = shlex.split(line)[0]
            if first in ("mbvi", ".venv/bin/mbvi") or _SKIP.match(line) or _ACTIVATE.match(line):
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


def test_readme_runs_its_bare_mbvi_lines_in_the_environment_make_sets_up() -> None:
    """The README sets up ``.venv`` with make: its ``mbvi`` lines activate it first or call ``.venv/bin/mbvi``."""
    active = False
    for line in shell_lines((ROOT / "README.md").read_text()):
        active = active or bool(_ACTIVATE.match(line))
        if shlex.split(line)[0] == "mbvi":
            assert active, f"README.md: `{line}` runs before `. .venv/bin/activate` (or write .venv/bin/mbvi)"


# --- Python blocks --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """A fenced code block of a Markdown page."""

    page: Path
    #: line (1-based) of the block's first line of code in the page
    line: int
    lang: str
    #: the code, without the fence's indentation
    code: str
    #: the reason of a ``<!-- no-run: reason -->`` marker right before the fence, else None
    no_run: str | None = None

    @property
    def file_name(self) -> str | None:
        """``NAME.py`` when the block's first line is the comment ``# NAME.py`` (the block is that file)."""
        first = self.code.lstrip("\n").split("\n", 1)[0].strip()
        m = re.fullmatch(r"#\s*([\w./-]+\.py)", first)
        return m.group(1) if m else None


def code_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a page, in order (fences indented in list items included)."""
    lines = page.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if _CLOSE.match(lines[j])), None)
        assert end is not None, f"{page.name}:{i + 1}: unclosed code fence"
        indent = len(m["indent"])
        code = "\n".join(line[min(indent, len(line) - len(line.lstrip(" "))) :] for line in lines[i + 1 : end])
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = _NO_RUN.match(before)
        blocks.append(Block(page, i + 2, m["lang"], code + "\n", marker["reason"].strip() if marker else None))
        i = end + 1
    return blocks


def python_blocks(page: Path) -> list[Block]:
    """The page's ```python blocks."""
    return [b for b in code_blocks(page) if b.lang == "python"]


def run_python_blocks(page: Path) -> list[tuple[Block, float]]:
    """Run a page's Python blocks in the current directory, in order, in one namespace; return (block, seconds).

    Blocks marked no-run are skipped; a block that names a file runs in a namespace of its own. An exception
    propagates with the page's file name and line numbers in its traceback.
    """
    namespace: dict = {"__name__": "__main__"}
    took = []
    for block in python_blocks(page):
        if block.no_run is not None:
            continue
        code = compile("\n" * (block.line - 1) + block.code, str(page), "exec")
        start = time.perf_counter()
        exec(code, {"__name__": Path(block.file_name).stem} if block.file_name else namespace)
        took.append((block, time.perf_counter() - start))
    return took


#: warnings a page's blocks may meet through the machine, not through mbvi or the page: sweeps.md starts a
#: LocalCluster, whose dashboard finds its port (8787) taken when another Dask cluster on the machine holds it;
#: distributed then warns and leaves the probe's socket unclosed
ENVIRONMENT_WARNINGS = {
    "sweeps.md": (
        r"ignore:Port \d+ is already in use:UserWarning",
        "ignore:unclosed <socket.socket:ResourceWarning",
        "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning",
    )
}


def _python_page_params() -> list:
    params = []
    for page in PAGES:
        if not any(b.no_run is None for b in python_blocks(page)):
            continue
        marks = [pytest.mark.slow] if page.name in SLOW_PYTHON_PAGES else []
        marks += [pytest.mark.filterwarnings(f) for f in ENVIRONMENT_WARNINGS.get(page.name, ())]
        params.append(pytest.param(page, id=page.name, marks=marks))
    return params


@pytest.fixture
def reader_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Undo what a page's blocks change in this process: sys.path, modules imported from its directory, figures."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    path, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None)
        if file and Path(file).resolve().is_relative_to(tmp_path.resolve()):
            del sys.modules[name]  # a scene file imported from the page's directory
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


@pytest.mark.parametrize("page", _python_page_params())
def test_every_python_block_of_a_page_runs_as_written(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader_process: None
) -> None:
    work = _workdir(tmp_path, page)
    before = _files(work)
    monkeypatch.chdir(work)
    start = time.perf_counter()
    if page.name in EXPECTED_WARNINGS:
        category, message = EXPECTED_WARNINGS[page.name]
        assert message in page.read_text(), f"{page.name} does not show the warning it emits"
        with pytest.warns(category, match=f"^{re.escape(message)}$"):  # others are re-emitted: errors
            took = run_python_blocks(page)
    else:
        took = run_python_blocks(page)
    for block, seconds in took:
        print(f"{page.name}:{block.line}  ({seconds:.1f} s)")
    print(f"{page.name}: {time.perf_counter() - start:.1f} s")
    assert_written_files_are_ignored(page, _files(work) - before)


def test_no_run_markers_are_listed_and_bounded() -> None:
    """Blocks kept from running are few, each says why, and every marker sits right before a Python block."""
    counts = {}
    for page in PAGES:
        blocks = python_blocks(page)
        marked = [b for b in blocks if b.no_run is not None]
        for b in marked:
            assert b.no_run, f"{page.name}:{b.line}: a no-run marker needs a reason"
        markers = sum(1 for line in page.read_text().splitlines() if _NO_RUN.match(line))
        stray = sum(1 for line in page.read_text().splitlines() if "no-run" in line and "<!--" in line)
        assert markers == stray == len(marked), f"{page.name}: a no-run marker that is malformed or not before a block"
        assert all(b.lang == "python" for b in code_blocks(page) if b.no_run is not None)
        if marked:
            counts[page.name] = len(marked)
    assert counts == NO_RUN, f"blocks marked no-run, by page: {counts} (listed in NO_RUN: {NO_RUN})"
    assert sum(counts.values()) <= MAX_NO_RUN


def test_the_pages_have_python_blocks_in_known_languages() -> None:
    """A control: the extraction finds the blocks (indented ones too), and no Python hides under another tag."""
    for page in PAGES:
        langs = {b.lang for b in code_blocks(page)}
        assert langs <= LANGUAGES, f"{page.name}: code blocks in {langs - LANGUAGES}"
    blocks = [b for page in PAGES for b in python_blocks(page)]
    assert len(blocks) > 50
    readme = python_blocks(ROOT / "README.md")
    assert readme and "mbvi.simulate(" in readme[0].code
    indented = [
        b for b in python_blocks(ROOT / "docs" / "plugins-integrator.md") if "def step(self, state, t):" in b.code
    ]
    assert indented and indented[0].code.startswith("from mbvi.integrators.rattle import shake")


def test_a_failing_block_fails_and_a_marked_one_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A control of the runner itself: one namespace per page, errors surface with the page's line, markers skip."""
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n```python\nx = 1\n```\n\n<!-- no-run: a fragment -->\n\n```python\nundefined_name\n```\n\n"
        "- a list item:\n\n  ```python\n  y = x + 1\n  ```\n\n```python\n# helper.py\nz = 5\n```\n\n"
        "```python\nassert y == 2\nassert 'z' not in globals()\nassert y == 3, 'the page is wrong'\n```\n"
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="the page is wrong") as err:
        run_python_blocks(page)
    assert err.traceback[-1].path == page and err.traceback[-1].lineno + 1 == 27  # the failing line of the page
    assert [(b.line, b.no_run) for b in python_blocks(page)] == [
        (4, None),
        (10, "a fragment"),
        (16, None),
        (20, None),
        (25, None),
    ]
