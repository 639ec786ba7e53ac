"""The integrator zoo: the seed course's comparison of time steppers on the pendulum.

The pendulum (m = l = g = 1, θ₀ = π/4, from rest) is run at steps
dt = 2⁻⁶ … 2⁻¹¹ under explicit Euler (energy grows), implicit Euler (energy
decays, faster at larger steps) and the variational integrators (energy
oscillates in a bounded band that shrinks with the step). :func:`compare`
returns the trajectories; :func:`figure` draws energy against time for every
run and phase portraits (θ, θ̇) at the largest step.

Examples
--------
From the repository root::

    .venv/bin/mbvi run scenes/integrator_zoo.py --integrator implicit_euler --out zoo.npz
    .venv/bin/python scenes/integrator_zoo.py zoo.png        # the comparison figure

or in Python, with the module loaded from its file::

    runs = zoo.compare(dts=(2**-6, 2**-8), t_end=10.0, integrators=("explicit_euler", "verlet"))
    runs["verlet", 2**-8].energy
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

import mbvi
from mbvi.scenefile import load_scene_module

T_END = 20.0
DT = 2.0**-6
INTEGRATOR = "verlet"

#: the step sizes of the seed comparison, s
DTS = tuple(2.0**-k for k in range(6, 12))
#: the classic pendulum of scenes/pendulum.py (this comparison runs exactly that scene)
_PENDULUM = load_scene_module(Path(__file__).with_name("pendulum.py"))

#: the documentation gallery draws the comparison at the four largest steps (the full set takes minutes)
GALLERY_FIGURE = {"dts": (2.0**-6, 2.0**-7, 2.0**-8, 2.0**-9)}

#: explicit Euler, implicit Euler, and the variational integrators
INTEGRATORS = ("explicit_euler", "implicit_euler", "symplectic_euler_a", "verlet", "midpoint")


def build(
    mass: float = 1.0, length: float = 1.0, g: float = 1.0, theta0: float = math.pi / 4, omega0: float = 0.0
) -> mbvi.Scene:
    """The pendulum of the comparison: a bob on a massless rod swinging in the x–z plane.

    Parameters
    ----------
    mass : float, default: 1
        Bob mass, kg.
    length : float, default: 1
        Rod length, m.
    g : float, default: 1
        Gravitational acceleration, m/s².
    theta0 : float, default: π/4
        Initial angle from the downward vertical, rad.
    omega0 : float, default: 0
        Initial angular velocity, rad/s.

    Returns
    -------
    mbvi.Scene
        One particle ``"bob"`` on a rod ``"world-bob"`` (exact period
        4 K(sin²(θ₀/2)) √(l/g) = 6.53434… s for the defaults).
    """
    return _PENDULUM.build(mass=mass, length=length, g=g, theta0=theta0, omega0=omega0)


def compare(
    dts: Sequence[float] = DTS,
    t_end: float = 10.0,
    integrators: Iterable[str] = INTEGRATORS,
    max_frames: int = 2000,
    **params: float,
) -> dict[tuple[str, float], mbvi.Trajectory]:
    """Simulate the pendulum with every integrator at every step size.

    Parameters
    ----------
    dts : sequence of float, default: 2⁻⁶ … 2⁻¹¹
        Step sizes, s.
    t_end : float, default: 10
        Simulated time, s (about 1.5 periods).
    integrators : iterable of str, default: :data:`INTEGRATORS`
        Registered integrator names (see ``mbvi.integrators()``).
    max_frames : int, default: 2000
        Keep at most about this many frames per run (``save_every``); every
        step is still taken.
    **params
        Passed to :func:`build` (``mass``, ``length``, ``g``, ``theta0``, ``omega0``).

    Returns
    -------
    dict
        ``(integrator, dt) -> mbvi.Trajectory``.

    Notes
    -----
    ``implicit_euler`` and ``midpoint`` solve a Newton system per step and cost
    a few ms per step: at dt = 2⁻¹¹ and t_end = 10 s that is about a minute each.
    """
    runs = {}
    for name in integrators:
        for dt in dts:
            every = max(1, math.ceil(t_end / dt / max_frames))
            runs[name, dt] = mbvi.simulate(build(**params), t_end, dt, name, save_every=every)
    return runs


def _angle(traj: mbvi.Trajectory) -> tuple[np.ndarray, np.ndarray]:
    """Pendulum angle θ from the downward vertical and its rate θ̇, rad and rad/s."""
    x, v = traj.position("bob"), traj.velocity("bob")
    theta = np.arctan2(x[:, 0], -x[:, 2])
    r2 = x[:, 0] ** 2 + x[:, 2] ** 2
    return theta, (-x[:, 2] * v[:, 0] + x[:, 0] * v[:, 2]) / r2


def figure(path: str | os.PathLike | None = None, runs: dict | None = None, **compare_options):
    """Energy against time for every run, and phase portraits at the largest step.

    Parameters
    ----------
    path : str or PathLike, optional
        Save the figure there (``.png``, ``.pdf``, ``.svg``).
    runs : dict, optional
        The result of :func:`compare`; computed with ``compare_options`` when omitted.
    **compare_options
        Passed to :func:`compare`.

    Returns
    -------
    matplotlib.figure.Figure
        One energy panel per integrator (a line per dt) and one phase-portrait
        panel (θ, θ̇) with every integrator at the largest dt.
    """
    if runs is None:
        runs = compare(**compare_options)
    try:
        from mbvi import plot as mbvi_plot
    except ImportError:  # the plotting module is optional
        mbvi_plot = None
    if mbvi_plot is None:
        import matplotlib

        if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
            matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(name for name, _ in runs))
    dts = sorted({dt for _, dt in runs}, reverse=True)
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(3.6 * (len(names) + 1), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=False):
        subset = {f"dt = 2^{round(math.log2(dt))}": runs[name, dt] for dt in dts if (name, dt) in runs}
        if mbvi_plot is not None:
            mbvi_plot.compare(subset, quantity="energy", ax=ax)
        else:
            for label, traj in subset.items():
                ax.plot(traj.t, traj.energy, lw=1.0, label=label)
            ax.legend(fontsize="small")
            ax.set_xlabel("time t [s]")
            ax.set_ylabel("energy [J]")
            ax.ticklabel_format(axis="y", useOffset=False)  # as mbvi.plot does: values, not "1e-5 + -7.071e-1"
        ax.set_title(name)
    ax = axes[0, -1]
    for name in names:
        if (name, dts[0]) in runs:
            theta, rate = _angle(runs[name, dts[0]])
            ax.plot(theta, rate, lw=0.9, label=name)
    ax.set_xlabel("θ [rad]")
    ax.set_ylabel("θ̇ [rad/s]")
    ax.set_title(f"phase portraits, dt = 2^{round(math.log2(dts[0]))}")
    ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


if __name__ == "__main__":
    figure(sys.argv[1] if len(sys.argv) > 1 else "integrator_zoo.png")
