"""Figures that only a sweep can make, for docs/sweeps.md (``make docs`` runs this).

* ``docs/gallery/sweep_flip_time.png`` — the double pendulum's flip-time map:
  released from rest at (θ₁, θ₂), the time until either arm first goes over
  the top, over a grid of initial angles.
* ``docs/gallery/sweep_period.png`` — the pendulum's period against its
  amplitude, measured from the zero crossings of every member, against the
  exact 4√(l/g)·K(sin²(θ₀/2)).

Both also get a section at the end of the generated ``docs/gallery.md`` (run
``tools/gen_gallery.py`` first, as ``make docs`` does).

Grids are coarse so the script takes well under a minute on two cores::

    python tools/gen_sweep_figures.py [--out docs] [--n 40] [--t-end 10]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "scenes" / "double_pendulum.py"
PENDULUM = ROOT / "scenes" / "pendulum.py"


def flip_times(ds) -> np.ndarray:
    """First time either arm's angle from the downward vertical passes ±π, s (NaN: never, or failed).

    ``ds`` is a double-pendulum sweep over (theta1, theta2) with bodies
    ``bob1``, ``bob2``; angles are unwrapped along time, so the saved states
    must be close enough that an arm turns by less than π between two of them.
    """
    p1 = ds.position.sel(body="bob1").values  # (n1, n2, time, 3)
    p2 = ds.position.sel(body="bob2").values
    arm1 = np.arctan2(p1[..., 0], -p1[..., 2])
    arm2 = np.arctan2(p2[..., 0] - p1[..., 0], -(p2[..., 2] - p1[..., 2]))
    t = ds.time.values
    out = np.full(arm1.shape[:2], np.nan)
    for arm in (arm1, arm2):
        with np.errstate(invalid="ignore"):
            flipped = np.abs(np.unwrap(np.nan_to_num(arm), axis=-1)) > math.pi
        first = np.where(flipped.any(axis=-1), t[np.argmax(flipped, axis=-1)], np.nan)
        out = np.fmin(out, first)
    out[ds.error.values != ""] = np.nan
    return out


def flip_time_map(path: Path, n: int, t_end: float) -> str:
    """Sweep the double pendulum over n × n initial angles and draw the flip-time map."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    import mbvi

    angles = np.linspace(-math.pi, math.pi, n + 2)[1:-1]  # open interval: ±π is already over the top
    start = time.perf_counter()
    ds = mbvi.sweep(
        str(DOUBLE), {"theta1": angles.tolist(), "theta2": angles.tolist()}, t_end=t_end, dt=1e-2, save_every=2
    )
    seconds = time.perf_counter() - start
    flips = flip_times(ds)
    fig, ax = plt.subplots(figsize=(6.4, 5.4), layout="constrained")
    ax.set_facecolor("white")
    image = ax.pcolormesh(angles, angles, flips.T, norm=LogNorm(vmin=0.3, vmax=t_end), cmap="magma", shading="nearest")
    fig.colorbar(image, ax=ax, label=f"time of the first flip, s (white: none before {t_end:g} s)")
    th = np.linspace(-math.pi, math.pi, 400)
    th1, th2 = np.meshgrid(th, th, indexing="ij")
    # point bobs of equal mass on equal arms: V = −mgl(2 cos θ₁ + cos θ₂); the lower arm goes over the top first,
    # at θ₁ = 0, θ₂ = π (V = −mgl), so a release from rest with 2 cos θ₁ + cos θ₂ > 1 never flips
    ax.contour(th, th, (2 * np.cos(th1) + np.cos(th2)).T, levels=[1.0], colors="0.4", linewidths=1.0)
    ax.set_xlabel("θ₁ (upper arm), rad")
    ax.set_ylabel("θ₂ (lower arm), rad")
    ax.set_title(f"Double pendulum (l = 1 m, m = 1 kg): flip time, {n}×{n} members")
    ax.set_aspect("equal")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"{ds.error.size} members in {seconds:.1f} s, {int((ds.error != '').sum())} failed"


def measured_period(t: np.ndarray, x: np.ndarray) -> float:
    """Mean period from the downward zero crossings of x(t) (linear interpolation), s; NaN if under 2 periods."""
    k = np.nonzero((x[:-1] > 0.0) & (x[1:] <= 0.0))[0]
    if len(k) < 3:
        return math.nan
    crossings = t[k] + (t[k + 1] - t[k]) * x[k] / (x[k] - x[k + 1])
    return float((crossings[-1] - crossings[0]) / (len(crossings) - 1))


def period_curve(path: Path) -> str:
    """Sweep the pendulum (l = g = 1) over amplitudes; periods against the elliptic-integral formula."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.special import ellipk

    import mbvi

    amplitudes = np.linspace(0.1, 3.0, 30)
    start = time.perf_counter()
    # 30 members of a few ms each: threads skip the seconds a process pool takes to start
    ds = mbvi.sweep(str(PENDULUM), {"theta0": amplitudes.tolist()}, t_end=50.0, dt=1e-2, scheduler="threads")
    seconds = time.perf_counter() - start
    t = ds.time.values
    x = ds.position.sel(body="bob", xyz="x").values
    measured = np.array([measured_period(t, xi) for xi in x])
    fine = np.linspace(0.0, 3.05, 300)
    exact = 4.0 * ellipk(np.sin(fine / 2) ** 2)
    error = np.abs(measured / (4.0 * ellipk(np.sin(amplitudes / 2) ** 2)) - 1.0)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True, layout="constrained")
    top.plot(fine, exact, color="0.3", label="exact: 4√(l/g) K(sin²(θ₀/2))")
    top.axhline(2 * math.pi, color="0.6", linestyle=":", label="small angles: 2π√(l/g)")
    top.plot(amplitudes, measured, "o", color="tab:blue", markersize=4, label="sweep (verlet, dt = 0.01 s)")
    top.set_ylabel("period, s")
    top.legend(loc="upper left")
    top.set_title("Pendulum (l = 1 m, g = 1 m/s²): period against amplitude")
    bottom.semilogy(amplitudes, error, "o-", color="tab:blue", markersize=4)
    bottom.set_ylabel("relative period error")
    bottom.set_xlabel("amplitude θ₀, rad")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"{ds.error.size} members in {seconds:.1f} s, max relative error {np.nanmax(error):.1e}"


BEGIN, END = "<!-- sweep figures: begin -->", "<!-- sweep figures: end -->"
SECTION = f"""{BEGIN}
## Sweeps: what only many runs can show

Made by `mbvi.sweep` in `tools/gen_sweep_figures.py` (see [Sweeps on Dask](sweeps.md)).

The double pendulum released from rest at (θ₁, θ₂): the time until either arm
first goes over the top. Inside the grey curve 2 cos θ₁ + cos θ₂ = 1 (around the origin) it never
can: it lacks the energy to lift even the lower bob over the top (V = −mgl(2 cos θ₁ + cos θ₂) for
the scene's point bobs).

![Flip time of the double pendulum over initial angles](gallery/sweep_flip_time.png)

The pendulum's period against its amplitude, measured from the zero crossings
of every member, against the exact 4√(l/g)·K(sin²(θ₀/2)).

![Pendulum period against amplitude](gallery/sweep_period.png)

```bash
mbvi sweep scenes/double_pendulum.py --grid theta1=-3,-2,-1,0,1,2,3 --grid theta2=-3,-2,-1,0,1,2,3 \\
    --t-end 10 --dt 1e-2 --out flips.zarr
```
{END}
"""


def add_to_gallery_page(page: Path) -> None:
    """Append (or replace) the sweep section of the generated gallery page, if there is one."""
    if not page.is_file():
        return
    text = page.read_text(encoding="utf-8")
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + text[text.index(END) + len(END) :].lstrip("\n")
    page.write_text(text.rstrip("\n") + "\n\n" + SECTION, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Write both figures into ``OUT/gallery`` and their section into ``OUT/gallery.md`` (when it exists)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="docs directory")
    parser.add_argument("--n", type=int, default=40, help="flip map: initial angles per axis")
    parser.add_argument("--t-end", type=float, default=10.0, help="flip map: simulated time per member, s")
    args = parser.parse_args(argv)
    gallery = args.out / "gallery"
    gallery.mkdir(parents=True, exist_ok=True)
    print("sweep figures: period curve:", period_curve(gallery / "sweep_period.png"), flush=True)
    print("sweep figures: flip map:", flip_time_map(gallery / "sweep_flip_time.png", args.n, args.t_end), flush=True)
    add_to_gallery_page(args.out / "gallery.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
