"""The gallery's commands run as written: each scene's ``mbvi run … --render …`` line, for the systems written in
their own coordinates too (their line asked for a GIF the command line refuses: they have no bodies to animate)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from mbvi.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _gallery():
    path = ROOT / "tools" / "gen_gallery.py"
    spec = importlib.util.spec_from_file_location("gen_gallery_commands", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_gallery_commands"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["hirai_pendulum", "double_pendulum_angles"])
def test_a_lagrangian_scenes_gallery_command_runs_as_written(name: str, tmp_path, monkeypatch) -> None:
    gen = _gallery()
    entry = gen.render_scene(ROOT / "scenes" / f"{name}.py", tmp_path, 0.5)
    assert entry.error is None and entry.render_as == "png"
    page = tmp_path / "gallery.md"
    gen.write_page([entry], ROOT / "scenes", page)
    command = next(line for line in page.read_text().splitlines() if line.startswith("mbvi run "))
    assert command == f"mbvi run scenes/{name}.py --render {name}.png"
    monkeypatch.chdir(ROOT)
    out = tmp_path / f"{name}.png"
    args = command.split()[1:-1] + [str(out)]  # the picture written to tmp_path, not the repository
    assert main(args) == 0
    assert out.stat().st_size > 10_000  # a picture, not an empty canvas


def test_a_scene_of_bodies_keeps_its_animation_command(tmp_path) -> None:
    gen = _gallery()
    entry = gen.Entry("pendulum", "Pendulum", "", "gallery/pendulum.png", None, 0.1)
    page = tmp_path / "gallery.md"
    gen.write_page([entry], ROOT / "scenes", page)
    assert "mbvi run scenes/pendulum.py --render pendulum.gif" in page.read_text()
