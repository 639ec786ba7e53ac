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
    clamp : {"start", "end", "both"}, optional
        Clamp these ends to the world: the end node is pinned and (with
        bending) its tangent held along the beam axis.
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
        if clamp not in (None, "start", "end", "both"):
            raise ValueError(f"{owner}: clamp must be None, 'start', 'end' or 'both', got {clamp!r}")
        self.clamp = clamp
        self.length = float(np.linalg.norm(self.end - self.start))
        if self.length == 0:
            raise ValueError(f"{owner}: start and end coincide")
        self.segment_length = self.length / self.segments

    #: what the beam's nodes, springs, bending element and clamps are built from (:meth:`expand`, when the beam is
    #: added): fixed once the beam is made
    _FIXED = frozenset({"start", "end", "segments", "density", "area", "youngs_modulus", "second_moment", "clamp",
                        "length", "segment_length"})  # fmt: skip

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
        ends = {"start": [0], "end": [n], "both": [0, n], None: []}[self.clamp]
        for i in ends:
            parts.append(Spherical(WORLD, nodes[i], anchor=xs[i], name=f"{self.name}:clamp[{i}]"))
        if self.second_moment is not None and (n >= 2 or ends):
            parts.append(BeamBending(self, clamp_start=0 in ends, clamp_end=n in ends and n > 0))
        return parts

    def describe(self) -> dict:
        """Geometry for rendering and strain read-outs."""
        return {"name": self.name, "nodes": self.nodes, "rest_lengths": [self.segment_length] * self.segments}


class BeamBending(Force):
    """The bending energy of one beam (added by :class:`Beam`)."""

    def __init__(self, beam: Beam, clamp_start: bool = False, clamp_end: bool = False) -> None:
        self._init_name(None, f"{beam.name}:bending")
        self.beam = beam
        self.bodies = tuple(beam.nodes)
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
            if e.clamp_start:
                ea.append(([], axis * ell))
                eb.append(edges[0])
                kappa.append(EI / (0.5 * ell))
            if e.clamp_end:
                ea.append(edges[-1])
                eb.append(([], axis * ell))
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


@hookimpl
def register_force_laws(register):
    """Register the beam bending law."""
    register(BeamBendingLaw)
