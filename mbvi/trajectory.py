"""Trajectories: saved states with energy, momentum, constraint error and per-body views."""

from __future__ import annotations

import json
import operator
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from mbvi import kinematics as kin
from mbvi._validate import coordinate_key
from mbvi.bodies import WORLD
from mbvi.geometry import BodyGeometry, LinkGeometry, SceneGeometry, joint_of_kind

if TYPE_CHECKING:
    from scipy.spatial.transform import Rotation

__all__ = ["Trajectory"]

_ARRAYS = ("t", "q", "v", "energy", "kinetic", "potential", "momentum", "angular_momentum", "constraint_error")
#: derived quantities a trajectory may compute on first use (given as a function of no arguments)
_LAZY = ("momentum", "angular_momentum", "constraint_error")


class _OnFirstUse:
    """A derived array computed when first read (the function given for it), then kept as a plain attribute."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        make = obj.__dict__["_make_" + self.name]
        value = np.asarray(make(), dtype=float)  # (a failure or a Ctrl-C here leaves the trajectory as it was)
        obj.__dict__[self.name] = value
        del obj.__dict__["_make_" + self.name]
        return value


def _load_keys(system: Any) -> tuple:
    """What the loads' callables of ``system`` read now (:meth:`mbvi.System._load_reads`), () for one without."""
    keys = getattr(system, "_load_reads", None)
    return keys() if keys is not None else ()


def _whole(value: Any, what: str) -> int:
    """``value`` as a whole number of frames (numpy integers too), or a ValueError naming ``what``: a float
    count took its integer part, silently (``head(2.7)`` gave 2 frames)."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{what}: expected a whole number of frames, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what}: expected a whole number of frames, got {value!r}") from None


class Trajectory:
    """The result of :func:`mbvi.simulate`.

    Attributes
    ----------
    t : ndarray, shape (n,)
        Times, s.
    q, v : ndarray, shape (n, nq)
        Generalized positions and velocities.
    energy, kinetic, potential : ndarray, shape (n,)
        Total, kinetic and potential energy, J.
    momentum, angular_momentum : ndarray, shape (n, 3)
        Linear momentum (kg m/s) and angular momentum about the origin (kg m²/s).
        For a :class:`mbvi.LagrangianSystem` run, ``momentum`` is the
        generalized momentum p = ∂L/∂v, shape (n, nq), and
        ``angular_momentum`` is empty, shape (n, 0).
    constraint_error : ndarray, shape (n,)
        max |g(q)| over all constraint rows.
    geometry : mbvi.geometry.SceneGeometry
        Bodies, links (joint anchors and axes in the body frames) and beams,
        fixed at assembly; what rendering reads.
    scene : mbvi.Scene or None
        The simulated scene (None after :meth:`load`).
    info : dict
        Integrator name, step size and other metadata.
    work : ndarray, shape (n,), or None
        The work W done on the system by its non-conservative forces (dampers, drag, joint friction, external
        loads, controllers) since the first frame, J: ``energy - energy[0] - work`` is the energy balance a run
        keeps, constant but for the integrator's error (a part of a run, :meth:`frame` or a slice, counts it
        from its own first frame). Zeros when the scene has no such force; None when the run did not measure it
        (a plugin integrator with its own ``integrate``). A LagrangianSystem's run with a force Q or an
        explicit time dependence holds W = ∫ (Q·v − ∂L/∂t) dt by trapezoids over its states when every step was
        saved (None otherwise, and for a conservative Lagrangian). A batch's members measure it as serial runs
        do.
    """

    work = None  # (a trajectory pickled before work existed has none: None, not an AttributeError)
    momentum = _OnFirstUse()
    angular_momentum = _OnFirstUse()
    constraint_error = _OnFirstUse()
    _system = None  # (an unpickled trajectory has no System)
    _loads_along = None  # what a Simulator's set_load gave the System's loads along the run (mbvi.reactions)
    _load_keys: tuple = ()  # what the loads' callables read when the run was made (System._load_reads)

    def __init__(
        self,
        t,
        q,
        v,
        *,
        energy,
        kinetic,
        potential,
        momentum,
        angular_momentum,
        constraint_error,
        geometry: SceneGeometry | dict,
        scene: Any = None,
        info: dict | None = None,
        work: Any = None,
    ) -> None:
        self.t = np.asarray(t, dtype=float)
        self.q = np.asarray(q, dtype=float)
        self.v = np.asarray(v, dtype=float)
        self.energy = np.asarray(energy, dtype=float)
        self.kinetic = np.asarray(kinetic, dtype=float)
        self.potential = np.asarray(potential, dtype=float)
        for name, value in zip(_LAZY, (momentum, angular_momentum, constraint_error), strict=True):
            if callable(value):  # computed on first use
                self.__dict__["_make_" + name] = value
            else:
                self.__dict__[name] = np.asarray(value, dtype=float)
        self.geometry = SceneGeometry.coerce(geometry)
        self.scene = scene
        self.info = dict(info or {})
        self.work = None if work is None else np.asarray(work, dtype=float)
        self._bodies = {b.name: b for b in self.geometry.bodies}
        self._links = {link.name: link for link in self.geometry.links}

    def __getstate__(self) -> dict:
        """For pickling: the derived quantities computed (their functions do not pickle), and a part of a run's
        joint turns resolved (without the whole run)."""
        self._resolve_turns()
        for name in _LAZY:
            getattr(self, name)
        state = dict(self.__dict__)
        state.pop("_run_angles", None)  # (a cache of the run's joint angles for its parts)
        state.pop("_system", None)  # (the run's System: constraint forces are read in the run's process)
        state.pop("_loads_along", None)
        state.pop("_multipliers", None)
        state.pop("_jacobians", None)
        return state

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_states(cls, system, t, q, v, *, scene=None, info=None, work=None, load_keys=None) -> Trajectory:
        """Build from saved states: the energies now (in batch), momenta and the constraint error when first read
        (a run through :func:`mbvi.simulate` costs the compiled loop, not these); ``work`` (n,), J, as measured by
        the run (zeros taken when the system has no non-conservative force)."""
        q = np.atleast_2d(q)
        v = np.atleast_2d(v)
        kin = system.kinetic(v)
        pot = system.potential(q)
        out = cls(
            t,
            q,
            v,
            energy=kin + pot,
            kinetic=kin,
            potential=pot,
            momentum=lambda: system.momentum(v),
            angular_momentum=lambda: system.angular_momentum(q, v),
            constraint_error=lambda: system.constraint_error(q),
            geometry=system.geometry,
            scene=scene,
            info=info,
            work=work if work is not None or system.has_forces else np.zeros(len(q)),
        )
        out._system = system
        out._load_keys = _load_keys(system) if load_keys is None else load_keys  # (a Simulator's: its own)
        return out

    @classmethod
    def many_from_states(cls, system, t, Q, V, counts, *, scene=None, info=None, work=None) -> list[Trajectory]:
        """One trajectory per member of a batch, derived quantities computed for all members at once.

        Parameters
        ----------
        t : ndarray, shape (nsave,)
        Q, V : ndarray, shape (B, nsave, nq)
        counts : sequence of int, length B
            How many saved states of each member are valid (a failed member stops early).
        work : ndarray, shape (B, nsave), optional
            The work of the non-conservative forces at each saved state, J, as the batch loop measured it (zero
            when the system has no such forces, as :meth:`from_states` has it).
        """
        Q, V = np.asarray(Q, dtype=float), np.asarray(V, dtype=float)
        kin = system.kinetic(V)
        counts = [int(n) for n in counts]
        if all(n == Q.shape[1] for n in counts):
            pot = system.potential(Q)
        else:  # members that stopped early: the laws see their states only (not the zeros after them: U = −k/|x|)
            valid = np.arange(Q.shape[1]) < np.array(counts)[:, None]
            pot = np.full(Q.shape[:2], np.nan)
            pot[valid] = system.potential(Q[valid])
        fields = {
            "t": np.asarray(t, dtype=float), "q": Q, "v": V, "energy": kin + pot, "kinetic": kin, "potential": pot,
            "momentum": np.asarray(system.momentum(V), dtype=float),
            "angular_momentum": np.asarray(system.angular_momentum(Q, V), dtype=float),
            "constraint_error": np.asarray(system.constraint_error(Q), dtype=float),
        }  # fmt: skip
        if work is None and not system.has_forces:  # nothing does work: zero, as from_states has it
            work = np.zeros(Q.shape[:2])
        if work is not None:
            fields["work"] = np.asarray(work, dtype=float)
        # one template, copied per member (the per-member constructor's checks cost ~10 µs a member)
        first = cls(**{k: (a if k == "t" else a[0]) for k, a in fields.items()}, geometry=system.geometry,
                    scene=scene, info=info)  # fmt: skip
        first._system, first._load_keys = system, _load_keys(system)
        # each member's views of the batch arrays, made by iterating over the batch axis (in C), as rows
        keys = [k for k in fields if k != "t"]
        rows = list(zip(*(list(fields[k]) for k in keys), strict=True))
        t_all, nsave, base = fields["t"], len(fields["t"]), first.__dict__
        out = []
        for b, n in enumerate(counts):
            traj = object.__new__(cls)
            d = traj.__dict__
            d.update(base)
            d["info"] = dict(first.info)
            d.update(zip(keys, rows[b], strict=True))
            d["t"] = t_all
            if n != nsave:  # a member that stopped early: its valid states only
                for k in keys:
                    d[k] = d[k][:n]
                d["t"] = t_all[:n]
            out.append(traj)
        return out

    @classmethod
    def from_scene(cls, scene) -> Trajectory:
        """A one-frame trajectory of the scene's initial state (for snapshots)."""
        from mbvi.assembly import assemble

        system = assemble(scene)
        s = system.initial_state(warn=False)
        return cls.from_states(system, [0.0], s.q[None], s.v[None], scene=scene, info={"integrator": None})

    def __len__(self) -> int:
        return len(self.t)

    def __repr__(self) -> str:
        span = f"t = {self.t[0]:g} … {self.t[-1]:g} s" if len(self.t) else "empty"
        return f"Trajectory({len(self.t)} frames, {span}, {len(self._bodies)} bodies)"

    def frame(self, i: int) -> Trajectory:
        """A one-frame trajectory holding frame ``i`` (negative: from the end); IndexError when there is none."""
        n = len(self.t)
        k = _whole(i, "frame")
        if not -n <= k < n:
            raise IndexError(f"frame {i} out of range for a trajectory of {n} states")
        k %= n
        return self._sliced(slice(k, k + 1))

    def head(self, count: int) -> Trajectory:
        """The trajectory of the first ``count`` frames (e.g. a failed run's states up to its failure); all of them
        when ``count`` is more."""
        count = _whole(count, "head")
        if count < 0:
            raise ValueError(f"head({count}): the count of frames must be 0 or more")
        return self._sliced(slice(0, count))

    def __getitem__(self, key: int | slice) -> Trajectory:
        """``traj[k]``: :meth:`frame` k; ``traj[a:b:s]``: the frames a, a + s, … before b as a trajectory (a
        positive step s: a part saved every s frames, whose joint turns count as such a run's, from this run's
        angle at its first frame)."""
        if isinstance(key, slice):
            if key.step is not None and _whole(key.step, "a slice's step") <= 0:
                raise ValueError(f"a trajectory's slice takes a positive step (frames in time order), got {key.step}")
            return self._sliced(key)
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)):
            raise TypeError(f"a trajectory is indexed by a frame number or a slice, not {type(key).__name__}")
        return self.frame(key)

    def _sliced(self, sl: slice) -> Trajectory:
        kw = {k: getattr(self, k)[sl] for k in _ARRAYS if k not in ("t", "q", "v")}
        start = sl.indices(len(self.t))[0]
        work = None
        if self.work is not None:  # counted from the part's own first frame, as a run's is from its start (the
            work = self.work[sl]  # whole run's count made a damped run's second half show its whole loss as error)
            work = work - work[0] if len(work) else work
        out = Trajectory(
            self.t[sl],
            self.q[sl],
            self.v[sl],
            geometry=self.geometry,
            scene=self.scene,
            info={k: v for k, v in self.info.items() if k not in _RUN_FIGURES},
            work=work,
            **kw,
        )
        out._system, out._loads_along, out._load_keys = self._system, self._loads_along, self._load_keys
        counted = start or hasattr(self, "_turns_from") or "joint_turns" in self.info
        if counted and len(out.t):  # its joints' turns count on from this run's at its first state (joint_angle),
            out._turns_from = (self, start)  # a part of a part, or of a saved part, as that part counts them
        return out

    # -- generalized coordinates (LagrangianSystem runs) ---------------------------------------------
    @property
    def coordinate_names(self) -> list[str]:
        """Names of the generalized coordinates of a LagrangianSystem run (empty for scenes)."""
        return list(self.geometry.extra.get("coordinates", ()))

    def coordinate(self, name: str) -> np.ndarray:
        """One generalized coordinate of a LagrangianSystem run, by name, shape (n,)."""
        names, name = self.coordinate_names, coordinate_key(name)  # (the Symbol the system was built from too)
        if name not in names:
            raise ValueError(f"unknown coordinate {name!r}; the coordinates are {names}")
        return self.q[:, names.index(name)].copy()

    # -- per-body views ------------------------------------------------------------------------------
    @property
    def body_names(self) -> list[str]:
        """Names of all bodies (beam nodes included)."""
        return list(self._bodies)

    def _body(self, name: str) -> BodyGeometry:
        try:
            return self._bodies[name]
        except KeyError:
            raise ValueError(f"unknown body {name!r}") from None

    def _maybe_body(self, name: str) -> BodyGeometry | None:
        return None if name == WORLD else self._body(name)

    def position(self, name: str) -> np.ndarray:
        """Position of a body's origin (centre of mass), m, shape (n, 3)."""
        return kin.body_position(self.q, self._maybe_body(name))

    def velocity(self, name: str) -> np.ndarray:
        """Velocity of a body's origin, m/s, shape (n, 3)."""
        return kin.body_velocity(self.v, self._maybe_body(name))

    def rotation(self, name: str, as_rotation: bool = False) -> np.ndarray | Rotation:
        """Body-to-world rotation matrices in the user's body frame, shape (n, 3, 3); with ``as_rotation``, the
        same n rotations as one :class:`scipy.spatial.transform.Rotation` (quaternions, Euler angles, …).

        Identity for particles and the world.
        """
        R = kin.body_rotation(self.q, self._maybe_body(name))
        if not as_rotation:
            return R
        from scipy.spatial.transform import Rotation

        return Rotation.from_matrix(R) if len(R) else Rotation.identity(0)

    def angular_velocity(self, name: str) -> np.ndarray:
        """Angular velocity in the world frame, rad/s, shape (n, 3) (ω = ½ Σᵢ rᵢ × ṙᵢ)."""
        return kin.body_angular_velocity(self.q, self.v, self._maybe_body(name))

    def point(self, name: str, anchor: Any) -> np.ndarray:
        """World position of a body-frame point (for the world: the point itself), m, shape (n, 3)."""
        return kin.body_point(self.q, self._maybe_body(name), anchor)

    # -- joints ----------------------------------------------------------------------------------
    def _link(self, name: str, kind: str) -> LinkGeometry:
        link = self._links.get(name)
        if link is None or link.kind != kind:
            raise ValueError(joint_of_kind(name, kind, {k: j.kind for k, j in self._links.items()}))
        return link

    def _joint(self, name: str, kind: str) -> tuple[LinkGeometry, BodyGeometry | None, BodyGeometry | None]:
        j = self._link(name, kind)
        return j, self._maybe_body(j.a), self._maybe_body(j.b)

    def joint_angle(self, name: str) -> np.ndarray:
        """Angle of a revolute joint (b relative to a, about its axis), rad, counting turns, shape (n,).

        A saved state knows the angle up to whole turns; the turns between two saved states are counted from the
        joint's rate (:func:`mbvi.kinematics.unwrap_by_rates`), so a joint may turn more than half a turn between
        them (``save_every``). A RuntimeWarning names the joint and the time when its rate changed too much
        between two saved states to tell the turns: save more often.
        """
        joint = self._joint(name, "revolute")
        angle, miss = kin.unwrap_by_rates(kin.joint_angle(self.q, *joint), kin.joint_rate(self.q, self.v, *joint),
                                          self.t)  # fmt: skip
        turns = self.info.get("joint_turns", {}).get(name)
        origin = getattr(self, "_turns_from", None)
        if turns is None and origin is not None:  # a part of a run (a frame, a slice): the run's turns by its start
            run, start = origin
            # the run's angle, unwrapped once per joint (a loop over frames unwrapped the whole run at every one)
            angles = run.__dict__.setdefault("_run_angles", {})
            if name not in angles:
                angles[name] = run.joint_angle(name)
            turns = 2.0 * np.pi * float(np.round((float(angles[name][start]) - angle[0]) / (2.0 * np.pi)))
            self.info.setdefault("joint_turns", {})[name] = turns
        if turns is not None:
            angle = angle + turns
        doubt = np.flatnonzero(miss > 0.5 * np.pi)
        if doubt.size:
            import warnings

            k = int(doubt[0])
            warnings.warn(
                f"revolute joint {name!r}: its turns between the states saved at t = {self.t[k - 1]:.6g} and "
                f"{self.t[k]:.6g} s are in doubt (its rate changed too much between them; {doubt.size} such gaps): "
                "save states more often (save_every)",
                RuntimeWarning,
                stacklevel=2,
            )
        return angle

    def joint_rate(self, name: str) -> np.ndarray:
        """Rate of a revolute joint angle, rad/s, shape (n,)."""
        return kin.joint_rate(self.q, self.v, *self._joint(name, "revolute"))

    def joint_displacement(self, name: str) -> np.ndarray:
        """Displacement of a prismatic joint along its axis from the initial configuration, m, shape (n,)."""
        return kin.joint_displacement(self.q, *self._joint(name, "prismatic"))

    def joint_displacement_rate(self, name: str) -> np.ndarray:
        """Rate of a prismatic joint displacement, m/s, shape (n,) (as a state's view reads it during the run)."""
        return kin.joint_displacement_rate(self.q, self.v, *self._joint(name, "prismatic"))

    # -- joint reactions ---------------------------------------------------------------------------
    def _joint_forces(self, joint: str, body: str | None) -> tuple[np.ndarray, str, Any]:
        """−Gᵀλ over one joint's rows at every saved state, (n, nq), the body it is read on, and the system."""
        from mbvi import reactions  # (scipy.sparse: loaded when reactions are first read, not with a trajectory)

        system = self._system
        if system is None or not hasattr(system, "rows"):
            raise ValueError(
                "constraint forces are read from the System a run was made with: this trajectory has none (loaded "
                "from a file, unpickled, or a LagrangianSystem's run); simulate again to read them"
            )
        rows = reactions.joint_rows(system, joint)
        j = system.layout.joints.get(joint)
        body = reactions.read_body(system, joint, body, (j.a, j.b) if j is not None else None)
        if "_multipliers" not in self.__dict__:  # (both kept for every joint read after: O(states × entries))
            changed = system._changed_loads(self._load_keys) if self._load_keys else []
            if changed:  # the reactions evaluate the loads again: with what they read now, not what acted
                raise ValueError(
                    f"constraint forces are computed from the loads at each state, and {', '.join(changed)} now "
                    "reads other values than it did in the run (a global or closure value set anew since): read "
                    "the reactions before changing what a load reads, or simulate again"
                )
            with np.errstate(all="ignore"):
                self.__dict__["_multipliers"], self.__dict__["_jacobians"] = reactions.multipliers(
                    system, self.t, self.q, self.v, self._loads_along
                )
        lam, gdata = self.__dict__["_multipliers"], self.__dict__["_jacobians"]
        return reactions.generalized_forces(system, self.q, lam, gdata, rows), body, system

    def constraint_force(self, joint: str, body: str | None = None) -> np.ndarray:
        """Force (N, world frame, shape (n, 3)) that a joint exerts on one of its bodies at each saved state
        (default: its child b; its parent a when b is the world).

        The reaction of the equations of motion at each state: λ from G M⁻¹ Gᵀ λ = G M⁻¹ f + Ġ v, the joint's
        part of −Gᵀλ read on the body's centre (:mod:`mbvi.reactions`). A bob swinging on a rod feels
        m g cos θ + m v²/L along it; at rest it is :meth:`mbvi.Equilibrium.constraint_force`. Computed when
        first read (a sparse solve per state), from the run's System: a trajectory loaded from a file has none.
        """
        f, body, system = self._joint_forces(joint, body)
        o = system.layout.offset[body]
        return f[:, o : o + 3]

    def constraint_torque(self, joint: str, body: str | None = None) -> np.ndarray:
        """Moment (N m, world frame, shape (n, 3)) that a joint exerts on a rigid body at each saved state, about
        the joint's anchor on it (see :meth:`constraint_force`); zero about a revolute joint's axis."""
        from mbvi import reactions

        f, body, system = self._joint_forces(joint, body)
        return reactions.moment(system, joint, body, self.q, f)

    def strain(self, beam: str) -> np.ndarray:
        """Axial strain of each beam segment, shape (n, segments)."""
        for b in self.geometry.beams:
            if b.name == beam:
                x = np.stack([self.position(node) for node in b.nodes], axis=1)
                lengths = np.linalg.norm(np.diff(x, axis=1), axis=-1)
                return lengths / np.asarray(b.rest_lengths) - 1.0
        raise ValueError(f"unknown beam {beam!r}")

    # -- persistence -----------------------------------------------------------------------------
    def _resolve_turns(self) -> None:
        """A part of a run: the turns of each revolute joint by its start, into ``info["joint_turns"]`` (rad), and
        the run let go (a saved or pickled part keeps its turns without the whole run)."""
        if getattr(self, "_turns_from", None) is None:
            return
        for name, link in self._links.items():
            if link.kind == "revolute":
                self.joint_angle(name)
        del self._turns_from

    def save(self, path: str | os.PathLike) -> None:
        """Save to a ``.npz`` file (arrays bit-exact, geometry and info as JSON).

        Format 2: the geometry is :meth:`mbvi.geometry.SceneGeometry.to_dict`
        (:meth:`load` reads format 1 files too). A part of a run (:meth:`frame`, a slice) keeps its revolute
        joints' turns in ``info["joint_turns"]``.
        """
        self._resolve_turns()
        arrays = {k: getattr(self, k) for k in _ARRAYS}
        if self.work is not None:
            arrays["work"] = self.work
        meta = json.dumps({"geometry": self.geometry.to_dict(), "info": self.info, "format": 2})
        _write_npz(path, {"meta": np.array(meta), **arrays})

    @classmethod
    def load(cls, path: str | os.PathLike) -> Trajectory:
        """Load a trajectory written by :meth:`save`.

        Raises
        ------
        FileNotFoundError
            If ``path`` does not exist.
        ValueError
            If the file is not a trajectory saved by mbvi (one line saying so).
        """
        import zipfile
        import zlib

        if not os.path.isfile(path):
            raise FileNotFoundError(f"trajectory file not found: {str(path)!r}")
        not_ours = f"{str(path)!r} is not an mbvi trajectory (expected a .npz file written by Trajectory.save)"
        try:
            with open(path, "rb") as fh:  # our handle: closed even when numpy cannot parse the file
                data = np.load(fh, allow_pickle=False)
                if not isinstance(data, np.lib.npyio.NpzFile) or "meta" not in data.files:
                    raise ValueError(not_ours)
                with data:
                    meta = json.loads(str(data["meta"]))
                    if not isinstance(meta, dict):
                        raise ValueError(not_ours)
                    version = meta.get("format", 1)
                    if version not in _FORMATS:  # a newer mbvi's file read as if it were ours misreads it silently
                        raise _Refused(
                            f"{str(path)!r} is an mbvi trajectory of format {version!r}; this mbvi reads formats "
                            f"{', '.join(map(str, _FORMATS))} (written by another version of mbvi?)"
                        )
                    names = [*_ARRAYS, *(["work"] if "work" in data.files else [])]
                    arrays = {k: _real_array(data[k], k, path) for k in names}
            geometry = SceneGeometry.from_dict(meta["geometry"])
            info = meta.get("info")
            info = dict(info or {})
        except FileNotFoundError:
            raise
        except _Refused as exc:
            raise ValueError(str(exc)) from None
        except (
            # a damaged file: what zipfile, zlib, numpy's .npy reader, json and the geometry's from_dict raise for one
            # (OSError and ValueError cover UnicodeDecodeError, json.JSONDecodeError and zipfile's CRC errors)
            OSError,
            EOFError,
            KeyError,
            IndexError,
            TypeError,
            AttributeError,
            ValueError,
            OverflowError,
            NotImplementedError,
            RuntimeError,  # zipfile: a member flagged encrypted; json: nesting too deep (RecursionError)
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            zlib.error,
        ) as exc:
            raise ValueError(not_ours) from exc  # not numpy's advice to allow pickles
        _check_consistent(path, arrays, geometry)
        t, q, v = arrays.pop("t"), arrays.pop("q"), arrays.pop("v")
        return cls(t, q, v, geometry=geometry, info=info, **arrays)


#: the file formats :meth:`Trajectory.load` reads (1: before ``work``; a file without a format is one)
_FORMATS = (1, 2)


class _Refused(ValueError):
    """A file :meth:`Trajectory.load` recognizes and refuses, with its own message (not "not an mbvi trajectory")."""


def _real_array(value: np.ndarray, name: str, path: str | os.PathLike) -> np.ndarray:
    """A saved array as floats; a ValueError naming it when it holds anything but real numbers (complex numbers
    lost their imaginary part to a warning; numeric strings were parsed)."""
    if value.dtype.kind not in "biuf":
        raise _Refused(f"{str(path)!r}: its array {name!r} holds {value.dtype} values, not real numbers")
    return np.asarray(value, dtype=float)


#: what ``info`` says of a whole run, not of a part of it (:meth:`Trajectory.frame`, ``head``): its energy figures
#: (a blown-up run's head carried the whole run's 1.5e25 J scale, its error read 8.5e-20) and a part's own turns
_RUN_FIGURES = ("energy_error", "energy_in_motion", "joint_turns")

#: generalized coordinates of a body of each kind (see :mod:`mbvi.layout`)
_NCOORDS = {"particle": 3, "rigid": 12}


def _coordinate_count(geometry: SceneGeometry) -> int | None:
    """Columns of ``q`` and ``v`` the geometry implies (None when it does not say: no bodies, no coordinates).

    Raises ValueError (a message without the file name) when the bodies do not tile the coordinates.
    """
    if "coordinates" in geometry.extra:  # a LagrangianSystem run: one column per named coordinate
        names = geometry.extra["coordinates"]
        if not isinstance(names, (list, tuple)):
            raise ValueError(f"the coordinate names are {type(names).__name__}, not a list")
        return len(names)
    if not geometry.bodies:
        return None
    nq = 0
    for body in sorted(geometry.bodies, key=lambda b: b.offset):
        size = _NCOORDS.get(body.kind)
        if size is None:
            raise ValueError(f"body {body.name!r} is of unknown kind {body.kind!r}")
        if body.offset != nq:
            raise ValueError(f"body {body.name!r} starts at coordinate {body.offset}, expected {nq}")
        nq += size
    return nq


def _check_consistent(path: str | os.PathLike, arrays: dict[str, np.ndarray], geometry: SceneGeometry) -> None:
    """Raise ValueError, naming the file and the mismatch, unless the loaded arrays fit each other and the geometry."""
    where = f"{str(path)!r} is not a consistent mbvi trajectory"
    t = arrays["t"]
    if t.ndim != 1:
        raise ValueError(f"{where}: t has shape {t.shape}, expected one dimension")
    n = len(t)
    if n > 1 and not np.all(np.diff(t) > 0):  # (a reversed file loaded, and rendering it failed with an IndexError)
        raise ValueError(f"{where}: its times t do not increase")
    try:
        nq = _coordinate_count(geometry)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    for name in ("q", "v"):
        a = arrays[name]
        if a.ndim != 2 or a.shape[0] != n:
            raise ValueError(f"{where}: {name} has shape {a.shape}, expected ({n}, nq) for the {n} times in t")
        if nq is not None and a.shape[1] != nq:
            raise ValueError(
                f"{where}: {name} has {a.shape[1]} columns, but the geometry has {nq} generalized coordinates"
            )
    if arrays["v"].shape != arrays["q"].shape:
        raise ValueError(f"{where}: v has shape {arrays['v'].shape}, q has shape {arrays['q'].shape}")
    for name in ("energy", "kinetic", "potential", "constraint_error", "work"):
        if name not in arrays:  # work: files of runs that did not measure it, and older files
            continue
        a = arrays[name]
        if a.shape != (n,):
            raise ValueError(f"{where}: {name} has shape {a.shape}, expected ({n},) for the {n} times in t")
    lagrangian = bool(geometry.extra.get("coordinates"))  # its momentum: p = ∂L/∂q̇, one column a coordinate
    for name in ("momentum", "angular_momentum"):
        a = arrays[name]
        if a.ndim != 2 or a.shape[0] != n:
            raise ValueError(f"{where}: {name} has shape {a.shape}, expected {n} rows for the {n} times in t")
        width = arrays["q"].shape[1] if lagrangian and name == "momentum" else 3 if not lagrangian else a.shape[1]
        if a.shape[1] != width:
            raise ValueError(f"{where}: {name} has shape {a.shape}, expected ({n}, {width}) for the {n} times in t")


def _write_npz(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez_compressed`` at deflate level 1: the file of a run of floats is ~3 % larger than at numpy's level 6,
    and it is written in half the time (an 8001-state run of a chain of 8 bodies: :meth:`Trajectory.save` took 0.38 s,
    now 0.24 s with its derived quantities, for 4.3 MB; the run took 0.15 s). ``np.load`` reads it as any ``.npz``."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, value in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.asanyarray(value), allow_pickle=False)
