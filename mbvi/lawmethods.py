"""The NumPy methods of a force law that gives a role only in its compiled form.

A plugin law may give its force, ∇U or U only as an :class:`mbvi.Kernel` or as instances of the engine's fused
families (:class:`mbvi.engine.contract.Family`), without writing the law's NumPy method of that role. The NumPy
paths (``explicit_euler``, ``csm``, statics, the energies) call the NumPy methods: :class:`KernelMethod` and
:class:`FamilyMethod` evaluate the compiled form there, so that they see the force the compiled loop applies
(they took it as zero: a tether given as a kernel or a ``point_force`` family fell freely under ``explicit_euler``).
"""

from __future__ import annotations

import numpy as np

from mbvi.engine.contract import FAMILY_ROLES, Family, Kernel, kernel_as_numpy
from mbvi.kernels import AffineMap

__all__ = ["FamilyMethod", "KernelMethod", "RoleMethod", "SumMethod", "numpy_methods"]

#: the families whose potential :class:`FamilyMethod` evaluates (every family of the ``gradient`` role)
_POTENTIAL_FAMILIES = tuple(name for name, role in FAMILY_ROLES.items() if role == "gradient")


class RoleMethod:
    """The NumPy method ``role`` (``force``, ``gradient`` or ``potential``) of a law with ``nq`` coordinates, at
    each configuration of q (..., nq) (a batched law's potential and gradient_batch call it on many).

    Subclasses evaluate one configuration in :meth:`_one`. The objects hold arrays and kernels only: a System
    holding them pickles.
    """

    def __init__(self, role: str, nq: int) -> None:
        self.role, self.nq = role, nq

    def __call__(self, q: np.ndarray, v: np.ndarray | None = None, t: float = 0.0) -> np.ndarray | float:
        """The role's value at q (..., nq), m or rad, with velocity v (same shape), m/s, at time t, s: U (...,) in
        J, ∇U or the force (..., nq) in N."""
        q = np.asarray(q, dtype=float)
        if q.ndim > 1:
            rows = q.reshape(-1, self.nq)
            vs = [None] * len(rows) if v is None else np.asarray(v, dtype=float).reshape(-1, self.nq)
            out = np.array([self._one(x, w, t) for x, w in zip(rows, vs, strict=True)])
            return out.reshape(q.shape[:-1] + out.shape[1:])
        return self._one(q, v, t)

    def _one(self, q: np.ndarray, v: np.ndarray | None, t: float) -> np.ndarray | float:
        raise NotImplementedError


class KernelMethod(RoleMethod):
    """The method calling the law's kernel ``fn(q, v, t, ints, floats, out)`` of ``part`` as Python (its numba
    dispatcher's Python form, found at each call: pickled, the dispatcher goes by its name)."""

    def __init__(self, role: str, part: Kernel, nq: int) -> None:
        super().__init__(role, nq)
        self.part = part

    def _one(self, q: np.ndarray, v: np.ndarray | None, t: float) -> np.ndarray | float:
        fn = kernel_as_numpy(getattr(self.part, self.role), self.part, self.role)
        out = np.zeros(1 if self.role == "potential" else self.nq)
        v = np.zeros(self.nq) if v is None else np.asarray(v, dtype=float)
        fn(q, v, float(t), self.part.ints, self.part.floats, out)
        return float(out[0]) if self.role == "potential" else out


class FamilyMethod(RoleMethod):
    """The method evaluating the law's ``families``: the force and ∇U by the compiled loop's own code
    (:func:`mbvi.engine.kernels.nonconservative_force` and :func:`~mbvi.engine.kernels.gradient` on a model of
    these families alone, packed at the first call), U by the families' formulas (the potential is not a role
    of the compiled loop)."""

    def __init__(self, role: str, families: list[Family], nq: int) -> None:
        super().__init__(role, nq)
        self.families = list(families)
        self._model: tuple[np.ndarray, np.ndarray] | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_model": None}  # (packed again where it is unpickled)

    def _one(self, q: np.ndarray, v: np.ndarray | None, t: float) -> np.ndarray | float:
        if self.role == "potential":
            return sum((_potential(f, q) for f in self.families), 0.0)
        from mbvi.engine import kernels as K  # (numba: loaded when a NumPy path first needs it)
        from mbvi.engine.model import family_model

        if self._model is None:
            self._model = family_model(self.nq, self.families)
        I, F = self._model
        out = np.zeros(self.nq)
        q = np.ascontiguousarray(q, dtype=float)
        if self.role == "gradient":
            K.gradient(I, F, q, 0.0, out)
        else:
            v = np.zeros(self.nq) if v is None else np.ascontiguousarray(v, dtype=float)
            K.nonconservative_force(I, F, q, v, float(t), out)
        return out


def _points(m: tuple, q: np.ndarray) -> np.ndarray:
    """The points (m, 3) of the affine map ``m = (idx, w, c)`` at q (nq,)."""
    idx, w, c = m
    return AffineMap(idx, w, c, len(q))(q)


def _potential(family: Family, q: np.ndarray) -> float:
    """U(q), J, of one family's instances (zero for a family of non-conservative forces): the potential whose
    gradient the compiled kernels of :mod:`mbvi.engine.kernels` take."""
    a = family.arrays
    if family.name == "gravity":
        return -float(np.asarray(a[0], float) @ q)
    if family.name == "spring":
        r = np.linalg.norm(_points(a[0], q), axis=-1)
        return float(np.sum(0.5 * np.asarray(a[1], float) * (r - np.asarray(a[2], float)) ** 2))
    if family.name == "torsion_spring":
        u1, u2, w = _points(a[0], q), _points(a[1], q), _points(a[2], q)
        theta = np.arctan2(np.sum(u2 * w, axis=-1), np.sum(u1 * w, axis=-1))
        dev = (theta - np.asarray(a[4], float) + np.pi) % (2 * np.pi) - np.pi
        return float(np.sum(0.5 * np.asarray(a[3], float) * dev**2))
    if family.name == "bending":
        ea, eb = _points(a[0], q), _points(a[1], q)
        c = np.sum(ea * eb, axis=-1) / (np.linalg.norm(ea, axis=-1) * np.linalg.norm(eb, axis=-1))
        return float(np.sum(np.asarray(a[2], float) * (1.0 - c)))
    return 0.0


class SumMethod(RoleMethod):
    """The sum of several methods of one role (a law giving ∇U as a kernel and as ``spring`` families too)."""

    def __init__(self, role: str, terms: list[RoleMethod], nq: int) -> None:
        super().__init__(role, nq)
        self.terms = terms

    def _one(self, q: np.ndarray, v: np.ndarray | None, t: float) -> np.ndarray | float:
        return sum((term._one(q, v, t) for term in self.terms[1:]), self.terms[0]._one(q, v, t))


def numpy_methods(missing: list[str], parts: list, nq: int) -> dict[str, RoleMethod]:
    """The NumPy methods of the ``missing`` roles that the compiled ``parts`` (Kernels and Families) give, each
    the sum of what gives it: the kernels of that role, and the families of that role (the potential: the
    families of the gradient role)."""
    families = [p for p in parts if isinstance(p, Family)]
    made: dict[str, RoleMethod] = {}
    for role in missing:
        terms: list[RoleMethod] = [KernelMethod(role, p, nq) for p in parts
                                   if isinstance(p, Kernel) and role in dict(p.roles())]  # fmt: skip
        of_role = _POTENTIAL_FAMILIES if role == "potential" else [n for n, r in FAMILY_ROLES.items() if r == role]
        mine = [f for f in families if f.name in of_role]
        if mine:
            terms.append(FamilyMethod(role, mine, nq))
        if terms:
            made[role] = terms[0] if len(terms) == 1 else SumMethod(role, terms, nq)
    return made
