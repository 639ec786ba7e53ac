"""Elastic beams as chains of particles: axial springs (linear FE, lumped mass) and discrete bending."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from mbvi._validate import name as check_name
from mbvi._validate import positive, vector3
from mbvi.bodies import WORLD, Particle
from mbvi.engine.contract import Family
from mbvi.forcelaws.base import ForceLaw
from mbvi.forces import Force, Spring
from mbvi.hookspecs import hookimpl
from mbvi.joints import Spherical
from mbvi.kernels import AffineMap

__all__ = ["Beam", "BeamBending", "BeamBendingLaw"]


class Beam:
    """A straight elastic beam discretized into ``segments`` linear elements.

    Nodes are particles named ``name[0]`` … ``name[segments]`` that joints,
    forces and ``traj.position`` accept like any body. Axial stiffness is EA
    from linear finite elements (a spring EA/ℓ per segment) with lumped
    masses ρAℓ/2 per node and segment; with ``second_moment`` the beam also
    resists bending through the discrete curvature energy
    Σᵢ (EI/ℓ̄ᵢ)(1 − êᵢ₋₁·êᵢ) ≈ Σᵢ ½ EI φᵢ²/ℓ̄ᵢ at interior nodes.

    Parameters
    ----------
    name : str
    start, end : array_like, shape (3,)
        End points, m.
    segments : int
        Number of elements (≥ 1).
    density : float
        ρ, kg/m³.
    area : float
        Cross-section area A, m².
    youngs_modulus : float
        E, Pa.
    second_moment : float, optional
        Second moment of area I, m⁴ (enables bending stiffness EI).
    clamp : {"start", "end", "both"} or dict, optional
        Clamp these ends: the end node is pinned and (with bending) its
        tangent held along the beam axis. A string clamps to the world; a
        mapping ``{"start": "hub", "end": "world"}`` welds each end it names
        to that body (a rigid body, or the world): the node is pinned at its
        place on the body and the end's tangent turns with the body.
    """

    def __init__(
        self,
        name: str,
        start: Any,
        end: Any,
        segments: int,
        density: float,
        area: float,
        youngs_modulus: float,
        second_moment: float | None = None,
        clamp: str | None = None,
    ) -> None:
        self.name = check_name(name, "Beam")
        owner = f"Beam {self.name!r}"
        self.start = vector3(start, "start", owner)
        self.end = vector3(end, "end", owner)
        if isinstance(segments, bool) or not isinstance(segments, (int, np.integer)) or segments < 1:
            raise ValueError(f"{owner}: segments must be a positive integer, got {segments!r}")
        self.segments = int(segments)
        self.density = positive(density, "density", owner)
        self.area = positive(area, "area", owner)
        self.youngs_modulus = positive(youngs_modulus, "youngs_modulus", owner)
        self.second_moment = None if second_moment is None else positive(second_moment, "second_moment", owner)
        self.clamp = clamp
        #: the clamped ends and what each is clamped to: ``{"start": "world"}`` for ``clamp="start"``
        self.clamps = _clamps(clamp, owner)
        self.length = float(np.linalg.norm(self.end - self.start))
        if self.length == 0:
            raise ValueError(f"{owner}: start and end coincide")
        self.segment_length = self.length / self.segments

    #: what the beam's nodes, springs, bending element and clamps are built from (:meth:`expand`, when the beam is
    #: added): fixed once the beam is made
    _FIXED = frozenset({"start", "end", "segments", "density", "area", "youngs_modulus", "second_moment", "clamp",
                        "clamps", "length", "segment_length"})  # fmt: skip

    def __setattr__(self, key: str, value: Any) -> None:
        """Refuses to change a parameter the beam is built from: ``b.youngs_modulus = -2e11`` after ``scene.add(b)``
        was taken unchecked and half applied (the bending law read it again, the springs were built already)."""
        if key in self._FIXED and key in self.__dict__:
            raise AttributeError(
                f"Beam {self.__dict__.get('name')!r}: {key} is fixed once the beam is made (its nodes, springs and "
                "clamps are built from it); make a new Beam"
            )
        super().__setattr__(key, value)

    @property
    def nodes(self) -> list[str]:
        """Node names ``name[i]``."""
        return [f"{self.name}[{i}]" for i in range(self.segments + 1)]

    @property
    def wave_speed(self) -> float:
        """Axial wave speed c = √(E/ρ), m/s."""
        return float(np.sqrt(self.youngs_modulus / self.density))

    def expand(self) -> list:
        """The particles, springs, bending element and clamps that make up the beam."""
        n, ell = self.segments, self.segment_length
        m_seg = self.density * self.area * ell
        xs = self.start + np.linspace(0.0, 1.0, n + 1)[:, None] * (self.end - self.start)
        masses = np.full(n + 1, m_seg)
        masses[[0, -1]] = 0.5 * m_seg
        nodes = self.nodes
        parts: list = [Particle(nodes[i], mass=masses[i], position=xs[i]) for i in range(n + 1)]
        k = self.youngs_modulus * self.area / ell
        for i in range(n):
            s = Spring(nodes[i], nodes[i + 1], stiffness=k, rest_length=ell, name=f"{self.name}:axial[{i}]")
            s.internal = True
            parts.append(s)
        ends = {0 if end == "start" else n: body for end, body in self.clamps.items()}
        for i, body in ends.items():
            parts.append(Spherical(body, nodes[i], anchor=xs[i], name=f"{self.name}:clamp[{i}]"))
        if self.second_moment is not None and (n >= 2 or ends):
            parts.append(BeamBending(self, clamp_start=ends.get(0), clamp_end=ends.get(n) if n > 0 else None))
        return parts

    def describe(self) -> dict:
        """Geometry for rendering and strain read-outs."""
        return {"name": self.name, "nodes": self.nodes, "rest_lengths": [self.segment_length] * self.segments}


def _clamps(clamp: Any, owner: str) -> dict[str, str]:
    """``clamp`` as {end: body}: "start" → {"start": "world"}; a mapping's ends and body names checked."""
    if clamp is None or (isinstance(clamp, str) and clamp in ("start", "end", "both")):
        return {"start": {"start": WORLD}, "end": {"end": WORLD}, "both": {"start": WORLD, "end": WORLD}, None: {}}[
            clamp
        ]
    if not isinstance(clamp, dict):
        raise ValueError(
            f"{owner}: clamp must be None, 'start', 'end', 'both' or a mapping such as {{'start': 'hub'}}, "
            f"got {clamp!r}"
        )
    for end, body in clamp.items():
        if end not in ("start", "end"):
            raise ValueError(f"{owner}: clamp's keys are 'start' and 'end' (the beam's ends), got {end!r}")
        if not isinstance(body, str) or not body:
            raise ValueError(f"{owner}: clamp[{end!r}] must name a body (or 'world'), got {body!r}")
    return {end: str(clamp[end]) for end in ("start", "end") if end in clamp}


class BeamBending(Force):
    """The bending energy of one beam (added by :class:`Beam`).

    ``clamp_start``, ``clamp_end``: the body each end is clamped to ("world" or a rigid body), or None.
    """

    def __init__(self, beam: Beam, clamp_start: str | None = None, clamp_end: str | None = None) -> None:
        self._init_name(None, f"{beam.name}:bending")
        self.beam = beam
        held = [b for b in (clamp_start, clamp_end) if b not in (None, WORLD)]
        self.bodies = tuple(beam.nodes) + tuple(dict.fromkeys(held))
        self.clamp_start = clamp_start
        self.clamp_end = clamp_end


class BeamBendingLaw(ForceLaw):
    """U = Σ κᵢ (1 − êₐ·ê_b) over consecutive edge pairs, κ = EI/ℓ̄ (ℓ̄ = ℓ inside, ℓ/2 at a clamp)."""

    name = "beam_bending"
    element = BeamBending
    has_potential = True
    batched = True

    def __init__(self, elements, layout):
        super().__init__(elements, layout)
        ea, eb, kappa = [], [], []
        for e in elements:
            b = e.beam
            off = [layout.offset[nm] for nm in b.nodes]
            ell = b.segment_length
            EI = b.youngs_modulus * b.second_moment
            axis = (b.end - b.start) / b.length
            edges = [([(off[i + 1], 1.0), (off[i], -1.0)], np.zeros(3)) for i in range(b.segments)]
            for i in range(1, b.segments):
                ea.append(edges[i - 1])
                eb.append(edges[i])
                kappa.append(EI / ell)
            if e.clamp_start is not None:
                ea.append(_held_tangent(layout, e, e.clamp_start, axis * ell))
                eb.append(edges[0])
                kappa.append(EI / (0.5 * ell))
            if e.clamp_end is not None:
                ea.append(edges[-1])
                eb.append(_held_tangent(layout, e, e.clamp_end, axis * ell))
                kappa.append(EI / (0.5 * ell))
        self.Ea = AffineMap.from_terms(ea, self.nq)
        self.Eb = AffineMap.from_terms(eb, self.nq)
        self.kappa = np.array(kappa)
        self._support = np.unique(np.concatenate([self.Ea.cols.ravel(), self.Eb.cols.ravel()]))

    def potential(self, q):
        a, b = self.Ea(q), self.Eb(q)
        # 1 − êₐ·ê_b = ½|êₐ − ê_b|², free of the cancellation of 1 − cos φ at small angles
        d = a / np.linalg.norm(a, axis=-1, keepdims=True) - b / np.linalg.norm(b, axis=-1, keepdims=True)
        return np.sum(self.kappa * 0.5 * np.einsum("...j,...j->...", d, d), axis=-1)

    def gradient(self, q):
        a, b = self.Ea(q), self.Eb(q)
        la, lb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
        na, nb = a / la[:, None], b / lb[:, None]
        c = np.einsum("ij,ij->i", na, nb)
        ga = -(self.kappa / la)[:, None] * (nb - c[:, None] * na)
        gb = -(self.kappa / lb)[:, None] * (na - c[:, None] * nb)
        return self.Ea.adjoint(ga) + self.Eb.adjoint(gb)

    def hessian(self, q):
        # analytic (a finite difference is too noisy for the stability test of slender beams)
        a, b = self.Ea(q), self.Eb(q)
        la, lb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
        na, nb = a / la[:, None], b / lb[:, None]
        c = np.einsum("ij,ij->i", na, nb)
        ua, ub = nb - c[:, None] * na, na - c[:, None] * nb
        k = self.kappa[:, None, None]

        def proj(n):
            return np.eye(3) - n[:, :, None] * n[:, None, :]

        def own(u, n, ln):  # ∂²U/∂a² = κ (u nᵀ + n uᵀ + c (I − n nᵀ)) / |a|²
            return (
                k
                * (u[:, :, None] * n[:, None, :] + n[:, :, None] * u[:, None, :] + c[:, None, None] * proj(n))
                / (ln**2)[:, None, None]
            )

        def blocks(B):
            m = len(B)
            return sp.bsr_matrix((B, np.arange(m), np.arange(m + 1)), shape=(3 * m, 3 * m))

        Ja, Jb = self.Ea.matrix, self.Eb.matrix
        cross = Ja.T @ blocks(-k * (proj(na) @ proj(nb)) / (la * lb)[:, None, None]) @ Jb
        H = Ja.T @ blocks(own(ua, na, la)) @ Ja + Jb.T @ blocks(own(ub, nb, lb)) @ Jb + cross + cross.T
        return sp.csr_matrix(H)

    def compiled(self) -> Family:
        """The bending energy in the engine's ``bending`` kernel family (edge maps and κ)."""
        return Family("bending", (self.Ea.terms, self.Eb.terms, self.kappa))

    def support(self):
        return self._support


def _held_tangent(layout, element: BeamBending, body: str, tangent: np.ndarray) -> tuple[list, np.ndarray]:
    """The affine terms of a clamped end's tangent: fixed in the world, or turning with the rigid body it is welded
    to (its columns of R times the tangent's body-frame coordinates)."""
    if body == WORLD:
        return [], tangent
    if layout.kind(body) != "rigid":
        raise ValueError(
            f"Beam {element.beam.name!r}: clamp to {body!r}, a {layout.kind(body)}, which has no orientation to "
            "hold the beam's end along; weld it to a RigidBody (or pin it with a Spherical joint)"
        )
    return layout.direction(body, layout.to_body_direction(body, tangent))


@hookimpl
def register_force_laws(register):
    """Register the beam bending law."""
    register(BeamBendingLaw)
