"""Diagnostic plots of trajectories with Matplotlib.

Every function returns the :class:`matplotlib.figure.Figure` it drew on and
never calls ``plt.show()``; pass ``ax=`` to draw into an existing axes. On a
Linux machine without a display (and outside Jupyter) the non-interactive
Agg backend is selected when this module is imported, unless a backend was
already chosen (``MPLBACKEND`` or an earlier ``import matplotlib.pyplot``).

Examples
--------
>>> traj = mbvi.simulate(scene, t_end=5.0, dt=1e-3)  # doctest: +SKIP
>>> mbvi.plot.energy_error(traj).savefig("drift.png")  # doctest: +SKIP
>>> mbvi.plot.compare({"verlet": a, "csm": b}, quantity="constraint_error")  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from numpy.typing import NDArray

if (
    sys.platform.startswith("linux")
    and not os.environ.get("DISPLAY")
    and not os.environ.get("WAYLAND_DISPLAY")
    and not os.environ.get("MPLBACKEND")
    and "matplotlib.pyplot" not in sys.modules
    and "ipykernel" not in sys.modules
):
    matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

__all__ = [
    "QUANTITIES",
    "compare",
    "constraint_error",
    "energy",
    "energy_error",
    "momentum",
    "phase_portrait",
    "summary",
]

_COMPONENTS = {"x": 0, "y": 1, "z": 2}


def _axes(ax: Axes | None, figsize: tuple[float, float] = (6.4, 4.0)) -> tuple[Figure, Axes]:
    """The given axes and its figure, or a new pyplot figure with one axes."""
    if ax is not None:
        return ax.figure, ax  # type: ignore[return-value]
    fig, new_ax = plt.subplots(figsize=figsize, layout="constrained")
    return fig, new_ax


def _with_states(traj: Any, who: str) -> None:
    """ValueError naming ``who`` for a trajectory with no states (a head(0), a run that failed at once): there is
    nothing to draw (an IndexError from inside the plot said so)."""
    if len(np.asarray(traj.t)) == 0:
        raise ValueError(f"{who}: the trajectory has no states to plot")


def _positive(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Values with non-positive entries replaced by NaN (gaps on a log axis)."""
    out = np.asarray(values, dtype=float).copy()
    out[~(out > 0)] = np.nan
    return out


def _plain_numbers(ax: Axes) -> None:
    """Tick labels that read as they are, never as an offset ("1e-5 + -7.071e-1") from a common value.

    An energy that a variational integrator keeps to 1e-5 would otherwise be
    labelled by its last digits. Linear axes only; log axes have no offset.
    """
    for axis in (ax.xaxis, ax.yaxis):
        formatter = axis.get_major_formatter()
        if isinstance(formatter, ScalarFormatter):
            formatter.set_useOffset(False)


def _note_if_empty(ax: Axes, values: NDArray[np.float64], text: str) -> None:
    if not np.any(np.asarray(values) > 0):
        ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")


def _has_constraints(traj: Any) -> bool:
    """Whether the run had constraints: joints or rods, beams, or a LagrangianSystem's g(q) = 0."""
    geometry = getattr(traj, "geometry", None)
    if geometry is None:
        return True
    joints = ("rod", "spherical", "revolute", "prismatic", "fixed")
    if any(link.kind in joints for link in geometry.links) or geometry.beams:
        return True
    return bool(getattr(traj, "info", {}).get("constraints", 0)) or any(b.kind == "rigid" for b in geometry.bodies)


# ---------------------------------------------------------------- quantities
#: what an energy error is divided by (:func:`mbvi.runs.energy_in_motion`), as the axes name it
MOTION = "E_motion"


def _energy_scale(traj: Any) -> tuple[float, str]:
    """The energy an error is relative to and its symbol: the run's energy in motion, max(max T, swing of U)
    (:func:`mbvi.runs.energy_in_motion`: |E₀| depended on where the potential is zero), as ``traj.info``'s
    ``energy_error`` is."""
    from mbvi.runs import energy_in_motion

    return energy_in_motion(traj.kinetic, traj.potential, getattr(traj, "info", None)), MOTION


def _work(traj: Any) -> NDArray[np.float64] | None:
    """The forces' work W since the start, J, when the run measured it and forces did work (else None)."""
    work = getattr(traj, "work", None)
    if work is None:
        return None
    work = np.asarray(work, dtype=float)
    return work if work.shape == np.shape(traj.energy) and np.any(work != 0.0) else None


def _relative_energy_error(traj: Any) -> NDArray[np.float64]:
    """``|E − E₀|`` — or the balance ``|E − E₀ − W|`` when forces did work W (a damped or driven run: E − E₀ is
    their work, not an error) — over the run's energy in motion (:func:`_energy_scale`)."""
    e = np.asarray(traj.energy, dtype=float)
    work = _work(traj)
    return np.abs(e - e[0] - (0.0 if work is None else work)) / _energy_scale(traj)[0]


def _norm_drift(values: Any) -> NDArray[np.float64]:
    v = np.asarray(values, dtype=float)
    return np.linalg.norm(v - v[0], axis=1)


#: Quantities :func:`compare` can plot: name -> (function of a trajectory, axis label, log scale).
QUANTITIES: dict[str, tuple[Callable[[Any], NDArray[np.float64]], str, bool]] = {
    "energy": (lambda tr: np.asarray(tr.energy, float), "total energy E [J]", False),
    "kinetic": (lambda tr: np.asarray(tr.kinetic, float), "kinetic energy T [J]", False),
    "potential": (lambda tr: np.asarray(tr.potential, float), "potential energy U [J]", False),
    "energy_error": (_relative_energy_error, "relative energy error |E − E₀| / E_motion", True),
    # no unit: g(q) is in m for a rod, m² for a LagrangianSystem's x² + y² − l², none for a rotation's rows
    "constraint_error": (lambda tr: np.asarray(tr.constraint_error, float), "constraint error max |g(q)|", True),
    "momentum": (lambda tr: np.linalg.norm(np.asarray(tr.momentum, float), axis=1), "|p| [kg·m/s]", False),
    "momentum_error": (lambda tr: _norm_drift(tr.momentum), "|p − p₀| [kg·m/s]", True),
    "angular_momentum": (
        lambda tr: np.linalg.norm(np.asarray(tr.angular_momentum, float), axis=1),
        "|L| [kg·m²/s]",
        False,
    ),
    "angular_momentum_error": (lambda tr: _norm_drift(tr.angular_momentum), "|L − L₀| [kg·m²/s]", True),
}


# ---------------------------------------------------------------- plots
def energy(traj: Any, ax: Axes | None = None) -> Figure:
    """Kinetic, potential and total energy against time.

    Parameters
    ----------
    traj : mbvi.Trajectory
        A simulated trajectory.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into (default: a new figure).

    Returns
    -------
    matplotlib.figure.Figure
        Three lines labelled ``kinetic``, ``potential`` and ``total``, J.
    """
    _with_states(traj, "energy")
    fig, ax = _axes(ax)
    t = np.asarray(traj.t)
    ax.plot(t, traj.kinetic, label="kinetic", lw=1.2)
    ax.plot(t, traj.potential, label="potential", lw=1.2)
    ax.plot(t, traj.energy, label="total", lw=1.8, color="k")
    ax.set_xlabel("time t [s]")
    ax.set_ylabel("energy [J]")
    ax.set_title("Energy")
    ax.legend(loc="best", fontsize="small")
    ax.grid(True, alpha=0.3)
    _plain_numbers(ax)
    return fig


def energy_error(traj: Any, ax: Axes | None = None) -> Figure:
    """Relative energy error ``|E(t) − E(0)| / E_motion`` on a log scale.

    ``E_motion`` is the run's energy in motion, the larger of its largest
    kinetic energy and the swing of its potential
    (:func:`mbvi.runs.energy_in_motion`, as ``traj.info["energy_error"]``
    and ``mbvi run`` divide by): not |E(0)|, which depends on where the
    potential is zero. A variational integrator's error
    oscillates in a band; a non-symplectic one drifts. When forces did work
    (``traj.work``: damping, drag, loads), E − E₀ is their work, not an error:
    the plot is then of the balance ``|E − E₀ − W|``, titled so (the error
    ``mbvi run`` reports).

    Parameters
    ----------
    traj : mbvi.Trajectory
        A simulated trajectory.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.

    Returns
    -------
    matplotlib.figure.Figure
    """
    _with_states(traj, "energy_error")
    fig, ax = _axes(ax)
    err = _relative_energy_error(traj)
    balance = _work(traj) is not None  # forces did work W: the error is that of the balance E − E₀ − W
    ax.semilogy(np.asarray(traj.t), _positive(err), lw=1.0,
                label="relative energy balance error" if balance else "relative energy error")  # fmt: skip
    _note_if_empty(ax, err, "energy balance kept to round-off" if balance else "energy conserved to round-off")
    ax.set_xlabel("time t [s]")
    ax.set_ylabel(f"|E − E₀ − W| / {_energy_scale(traj)[1]}" if balance else f"|E − E₀| / {_energy_scale(traj)[1]}")
    ax.set_title("Energy balance error (W: the forces' work)" if balance else "Energy error")
    ax.grid(True, which="both", alpha=0.3)
    _plain_numbers(ax)
    return fig


def momentum(traj: Any, ax: Axes | None = None, *, angular: bool = False) -> Figure:
    """Components of the total linear (or angular) momentum against time.

    Parameters
    ----------
    traj : mbvi.Trajectory
        A simulated trajectory.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.
    angular : bool, default: False
        Plot the angular momentum about the origin instead, kg·m²/s.

    Returns
    -------
    matplotlib.figure.Figure
        Three lines labelled ``p_x``, ``p_y``, ``p_z`` (or ``L_x`` …); for a
        :class:`mbvi.LagrangianSystem`'s run, one line of generalized momentum
        ∂L/∂v per coordinate, labelled ``p_<coordinate>``.
    """
    if angular and traj.coordinate_names:
        raise ValueError(
            "momentum(angular=True): a LagrangianSystem's run has no angular momentum (its coordinates are its "
            "own); momentum(traj) draws its generalized momentum ∂L/∂v"
        )
    _with_states(traj, "momentum")
    fig, ax = _axes(ax)
    values = np.asarray(traj.angular_momentum if angular else traj.momentum, dtype=float)
    generalized = bool(traj.coordinate_names) and not angular
    labels = traj.coordinate_names if generalized else list("xyz")[: values.shape[1]]
    sym = "L" if angular else "p"
    t = np.asarray(traj.t)
    for i, c in enumerate(labels):
        ax.plot(t, values[:, i], label=f"{sym}_{c}", lw=1.2)
    ax.set_xlabel("time t [s]")
    ax.set_ylabel("angular momentum [kg·m²/s]" if angular else
                  "generalized momentum ∂L/∂v" if generalized else "momentum [kg·m/s]")  # fmt: skip
    ax.set_title("Angular momentum" if angular else "Generalized momentum" if generalized else "Momentum")
    ax.legend(loc="best", fontsize="small")
    ax.grid(True, alpha=0.3)
    _plain_numbers(ax)
    return fig


def constraint_error(traj: Any, ax: Axes | None = None) -> Figure:
    """Largest constraint violation ``max |g(q)|`` against time, log scale.

    Parameters
    ----------
    traj : mbvi.Trajectory
        A simulated trajectory.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.

    Returns
    -------
    matplotlib.figure.Figure
    """
    _with_states(traj, "constraint_error")
    fig, ax = _axes(ax)
    err = np.asarray(traj.constraint_error, dtype=float)
    t = np.asarray(traj.t)
    ax.semilogy(t, _positive(err), lw=1.0, color="C3", label="max |g(q)|")
    _note_if_empty(ax, err, "no constraint violation" if _has_constraints(traj) else "no constraints")
    if len(t) > 1:
        ax.set_xlim(t[0], t[-1])
    ax.set_xlabel("time t [s]")
    ax.set_ylabel("max |g(q)|")
    ax.set_title("Constraint error")
    ax.grid(True, which="both", alpha=0.3)
    _plain_numbers(ax)
    return fig


def _with_unit(name: str, unit: str | None) -> str:
    """``"name [unit]"``, or the bare name when the unit is not known (``None``) or empty (dimensionless)."""
    return f"{name} [{unit}]" if unit else name


def _phase_data(
    traj: Any, coordinate: int | str, component: int | str | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], str, str | None]:
    """Position, velocity, name and unit (None: not known) of the coordinate a phase portrait shows."""
    if isinstance(coordinate, (int, np.integer)):
        return _indexed_coordinate(traj, int(coordinate))
    names = list(traj.coordinate_names)
    if coordinate in names:  # a LagrangianSystem's own coordinate: its unit is the user's, unknown here
        i = names.index(coordinate)
        return np.asarray(traj.q, float)[:, i], np.asarray(traj.v, float)[:, i], coordinate, None
    if coordinate not in traj.body_names:  # a body's name comes first, as it always did
        hinges = [link.name for link in traj.geometry.links if link.kind == "revolute"]
        sliders = [link.name for link in traj.geometry.links if link.kind == "prismatic"]
        if coordinate in hinges:
            angle, rate = traj.joint_angle(coordinate), traj.joint_rate(coordinate)
            return np.asarray(angle, dtype=float), np.asarray(rate, dtype=float), coordinate, "rad"
        if coordinate in sliders:
            return *_slider_motion(traj, coordinate), coordinate, "m"
        known = names or traj.body_names + hinges + sliders
        what = "coordinate" if names else "body, revolute or prismatic joint"
        raise ValueError(f"unknown {what} {coordinate!r}; choose one of {known} or an index into q")
    x = np.asarray(traj.position(coordinate), dtype=float)
    v = np.asarray(traj.velocity(coordinate), dtype=float)
    if component is None:
        c = int(np.argmax(np.ptp(x, axis=0)))
    elif isinstance(component, str):
        if component.lower() not in _COMPONENTS:
            raise ValueError(f"component must be 0, 1, 2, 'x', 'y' or 'z', got {component!r}")
        c = _COMPONENTS[component.lower()]
    else:
        c = int(component)
        if c not in (0, 1, 2):
            raise ValueError(f"component must be 0, 1, 2, 'x', 'y' or 'z', got {component!r}")
    return x[:, c], v[:, c], f"{coordinate}.{'xyz'[c]}", "m"


def _slider_motion(traj: Any, name: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Displacement (m) and its rate (m/s) of prismatic joint ``name``, shape (n,) each."""
    from mbvi import kinematics as kin

    link = next(link for link in traj.geometry.links if link.name == name and link.kind == "prismatic")
    bodies = {b.name: b for b in traj.geometry.bodies}
    a, b = bodies.get(link.a), bodies.get(link.b)  # None: the world
    q, v = np.asarray(traj.q, dtype=float), np.asarray(traj.v, dtype=float)
    return np.asarray(traj.joint_displacement(name), dtype=float), kin.joint_displacement_rate(q, v, link, a, b)


def _indexed_coordinate(traj: Any, i: int) -> tuple[NDArray[np.float64], NDArray[np.float64], str, str | None]:
    """Coordinate ``q[i]``: a LagrangianSystem's by its name (unit unknown); a scene's as the body position
    component it is (m), or ``q[i]`` for an entry of a rigid body's rotation matrix (dimensionless)."""
    q, v = np.asarray(traj.q, dtype=float), np.asarray(traj.v, dtype=float)
    if not -q.shape[1] <= i < q.shape[1]:
        raise ValueError(f"coordinate index {i} out of range for {q.shape[1]} coordinates")
    i %= q.shape[1]
    names = list(traj.coordinate_names)
    if names:
        return q[:, i], v[:, i], names[i], None
    for body in traj.geometry.bodies:
        k = i - body.offset
        if 0 <= k < 3:
            return q[:, i], v[:, i], f"{body.name}.{'xyz'[k]}", "m"
        if body.kind == "rigid" and 3 <= k < 12:
            return q[:, i], v[:, i], f"q[{i}]", ""  # an entry of the rotation matrix: no unit
    return q[:, i], v[:, i], f"q[{i}]", None


def phase_portrait(
    traj: Any,
    coordinate: int | str = 0,
    component: int | str | None = None,
    ax: Axes | None = None,
    *,
    unit: str | None = None,
) -> Figure:
    """Position against velocity of one coordinate.

    The axes are labelled with the coordinate's name and, where it is known,
    its unit: metres for a body's position or a prismatic joint's
    displacement, radians for a revolute joint's angle. A
    :class:`mbvi.LagrangianSystem`'s coordinates are the user's own (an
    angle, a length…), so they are labelled by name only unless ``unit``
    says what they are.

    Parameters
    ----------
    traj : mbvi.Trajectory
        A simulated trajectory.
    coordinate : int or str, default: 0
        An index into the generalized coordinates ``traj.q``; or a name: a
        coordinate of a LagrangianSystem run (``"theta1"``), a revolute joint
        of a scene (its angle, rad, and rate, rad/s), a prismatic joint (its
        displacement from the assembly configuration, m, and rate, m/s), or a
        body of a scene (then ``component`` picks x, y or z of its position,
        m, and velocity, m/s).
    component : {0, 1, 2, "x", "y", "z"}, optional
        Component of a body's position; default: the one that varies most.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.
    unit : str, optional
        Unit of the coordinate (``"rad"``, ``"m"``…), printed on the axes
        (the velocity's is ``unit/s``); overrides the one mbvi knows.

    Returns
    -------
    matplotlib.figure.Figure
        One line (position on x, velocity on y) labelled with the coordinate's
        name, plus a start marker.

    Raises
    ------
    ValueError
        For a coordinate index out of range, an unknown name or an unknown
        component.

    Examples
    --------
    >>> mbvi.plot.phase_portrait(traj, "theta1", unit="rad")  # doctest: +SKIP
    >>> mbvi.plot.phase_portrait(traj, "hinge0")  # a revolute joint: rad, rad/s  # doctest: +SKIP
    >>> mbvi.plot.phase_portrait(traj, "slider")  # a prismatic joint: m, m/s  # doctest: +SKIP
    """
    _with_states(traj, "phase_portrait")
    x, v, name, known = _phase_data(traj, coordinate, component)
    unit = known if unit is None else unit
    fig, ax = _axes(ax, figsize=(4.8, 4.0))
    ax.plot(x, v, lw=0.9, label=name)
    ax.plot(x[:1], v[:1], "o", color="k", ms=4, label="start")
    ax.set_xlabel(_with_unit(name, unit))
    ax.set_ylabel(_with_unit(f"d{name}/dt", f"{unit}/s" if unit else "1/s" if unit == "" else None))
    ax.set_title(f"Phase portrait of {name}")
    ax.grid(True, alpha=0.3)
    _plain_numbers(ax)
    return fig


def compare(
    trajs: Mapping[str, Any],
    quantity: str = "energy",
    ax: Axes | None = None,
) -> Figure:
    """One quantity of several trajectories (e.g. integrators) on one axes.

    Parameters
    ----------
    trajs : mapping of str to mbvi.Trajectory
        Label -> trajectory, e.g. ``{"verlet": a, "csm": b}``.
    quantity : str, default: "energy"
        One of :data:`QUANTITIES`: ``energy``, ``kinetic``, ``potential``,
        ``energy_error``, ``constraint_error``, ``momentum``,
        ``momentum_error``, ``angular_momentum``, ``angular_momentum_error``
        (the ``*_error`` ones on a log scale).
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.

    Returns
    -------
    matplotlib.figure.Figure
        One line per trajectory, labelled with its key. For ``energy_error``
        each run's error is divided by its own energy in motion, as in
        :func:`energy_error`: ``|E − E₀| / E_motion`` (J/J, dimensionless). A run whose
        forces did work W (``traj.work``) is drawn as its balance ``|E − E₀ − W|``.
        A :class:`mbvi.LagrangianSystem`'s momentum is its generalized momentum ∂L/∂v
        (no unit: the coordinates are the user's).

    Raises
    ------
    ValueError
        For an unknown quantity, an empty mapping, or an angular momentum of a
        LagrangianSystem's run.
    """
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown quantity {quantity!r}; choose one of {', '.join(QUANTITIES)}")
    if not trajs:
        raise ValueError("compare() needs at least one trajectory")
    for label, traj in trajs.items():
        _with_states(traj, f"compare: {label!r}")
    func, ylabel, log = QUANTITIES[quantity]
    generalized = any(bool(getattr(tr, "coordinate_names", None)) for tr in trajs.values())
    if generalized and quantity.startswith("angular_momentum"):
        raise ValueError(
            f"compare: {quantity!r} is not defined for a LagrangianSystem's run (its coordinates are its own); "
            "compare 'momentum' (the generalized momentum ∂L/∂v) or its error"
        )
    if generalized and quantity.startswith("momentum"):  # ∂L/∂v in the user's own coordinates: no one unit
        ylabel = "|p − p₀|, p = ∂L/∂v" if quantity.endswith("error") else "|p|, p = ∂L/∂v (generalized momentum)"
    if quantity == "energy_error":  # each run's error over its own energy in motion
        what = "E − E₀ − W" if any(_work(tr) is not None for tr in trajs.values()) else "E − E₀"
        ylabel = f"relative energy error |{what}| / {MOTION}"
    fig, ax = _axes(ax)
    for label, traj in trajs.items():
        values = func(traj)
        name = str(label)
        ax.plot(np.asarray(traj.t), _positive(values) if log else values, lw=1.1, label=name)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("time t [s]")
    ax.set_ylabel(ylabel)
    ax.set_title(quantity.replace("_", " ").capitalize())
    ax.legend(loc="best", fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    _plain_numbers(ax)
    return fig


def summary(traj: Any, path: str | os.PathLike[str] | None = None, *, dpi: int = 120) -> Figure:
    """A 2×2 overview: energy, energy error, constraint error, momentum.

    The figure is not registered with pyplot (it never pops up and needs no
    closing).

    Parameters
    ----------
    traj : mbvi.Trajectory
        A simulated trajectory.
    path : str or PathLike, optional
        Write the figure there (format from the suffix, e.g. ``.png``).
    dpi : int, default: 120
        Resolution of the written image.

    Returns
    -------
    matplotlib.figure.Figure
    """
    _with_states(traj, "summary")
    fig = Figure(figsize=(10.0, 7.0), layout="constrained")
    axes = fig.subplots(2, 2)
    energy(traj, axes[0, 0])
    energy_error(traj, axes[0, 1])
    constraint_error(traj, axes[1, 0])
    momentum(traj, axes[1, 1])
    if path is not None:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=dpi)
    return fig
