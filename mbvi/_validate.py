"""Input checks shared by the model classes: each raises ValueError naming the element."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mbvi.geometry import cross


def is_number(value: Any) -> bool:
    """A real number, not a bool or a string that looks like one."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        return False
    if isinstance(value, np.ndarray):
        return value.ndim == 0 and value.dtype.kind in "iuf"
    return isinstance(value, (int, float, np.integer, np.floating))


def as_float(value: Any) -> float:
    """A real number as a Python float; a float32 or float16 (a NumPy scalar or 0-d array) at the decimal it
    prints as, np.float32(0.01) → 0.01 rather than its binary value 0.009999999776 (a dt of which made an extra
    step of 2e-8 s and a time axis off the grid)."""
    a = np.asarray(value)
    if a.dtype.kind == "f" and a.dtype.itemsize < 8 and a.ndim == 0:
        return float(np.format_float_positional(a[()], unique=True, trim="-"))
    return float(value)


def positive_seconds(value: Any) -> float | None:
    """``value`` as a positive finite float (:func:`as_float`: a NumPy number too, a float32 at its decimal), or
    None when it is not one (a bool, text, zero, negative, inf or nan): what a step size ``dt`` must be."""
    if not is_number(value):
        return None
    out = as_float(value)
    return out if math.isfinite(out) and out > 0 else None


def holds_bool(value: Any) -> bool:
    """True when a (nested) list or tuple holds a bool, which NumPy would silently turn into 0 or 1."""
    if isinstance(value, (list, tuple)):
        return any(holds_bool(x) for x in value)
    return isinstance(value, (bool, np.bool_))


def vector3(value: Any, what: str, owner: str) -> np.ndarray:
    """Return ``value`` as a finite float array of shape (3,) (numbers only: no strings, no bools)."""
    try:
        raw = np.asarray(value)
        if raw.dtype.kind not in "iuf" and not (raw.dtype.kind == "O" and all(is_number(x) for x in raw.flat)):
            raise TypeError
        if holds_bool(value):
            raise TypeError
        arr = raw.astype(float).reshape(-1)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{owner}: {what} must be 3 numbers, got {value!r}") from None
    if arr.shape != (3,):
        raise ValueError(f"{owner}: {what} must be 3 numbers, got {value!r}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{owner}: {what} must be finite, got {value!r}")
    return arr


def positive(value: Any, what: str, owner: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a finite float that is positive (or non-negative); strings and bools are refused."""
    if not is_number(value):
        raise ValueError(f"{owner}: {what} must be a number, got {value!r}")
    try:
        x = float(value)
    except OverflowError:
        raise ValueError(f"{owner}: {what} must be finite, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{owner}: {what} must be finite, got {value!r}")
    if x < 0 or (x == 0 and not allow_zero):
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{owner}: {what} must be {kind}, got {value!r}")
    return x


def finite(value: Any, what: str, owner: str) -> float:
    """Return ``value`` as a finite float; strings and bools are refused."""
    if not is_number(value):
        raise ValueError(f"{owner}: {what} must be a number, got {value!r}")
    try:
        x = float(value)
    except OverflowError:
        raise ValueError(f"{owner}: {what} must be finite, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{owner}: {what} must be finite, got {value!r}")
    return x


def name(value: Any, kind: str) -> str:
    """Return a valid element name."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{kind} name must be a non-empty string, got {value!r}")
    return value


def unit(value: Any, what: str, owner: str) -> np.ndarray:
    """Return ``value`` normalised to a unit 3-vector."""
    v = vector3(value, what, owner)
    big = float(np.max(np.abs(v)))
    if big == 0:
        raise ValueError(f"{owner}: {what} must be non-zero")
    v = v / big  # (first: the norm of (1e200, 1e200, 0) overflows, and the axis came out zero)
    return v / np.linalg.norm(v)


def perpendicular_pair(axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return unit vectors u1, u2 with (u1, u2, axis) a right-handed orthonormal frame."""
    a = axis / np.linalg.norm(axis)
    helper = np.eye(3)[int(np.argmin(np.abs(a)))]
    u1 = cross(a, helper)
    u1 /= np.linalg.norm(u1)
    u2 = cross(a, u1)
    return u1, u2


def coordinate_key(name: Any) -> Any:
    """A generalized coordinate's name as the runs keep it: a sympy Symbol (anything with a ``name`` string, as
    the LagrangianSystem was built from) by its name; anything else as it is."""
    key = getattr(name, "name", None)
    return key if isinstance(key, str) and not isinstance(name, str) else name


class Checked:
    """An element's attribute checked whenever it is set, by the constructor's own check ``check(value, what,
    owner)``: ``body.mass = 0`` or ``spring.stiffness = nan`` after the element was made is the ValueError its
    constructor gives, not a run that fails later blaming the step. Kept as ``_<name>`` on the element."""

    _UNSET = object()

    def __init__(self, check: Any, doc: str, default: Any = _UNSET) -> None:
        self.check, self.__doc__, self.default = check, doc, default

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, f"_{name}"

    def __get__(self, element: Any, owner: type | None = None) -> Any:
        if element is None:
            return self
        if self.default is Checked._UNSET:
            return getattr(element, self.slot)
        return getattr(element, self.slot, self.default)

    def __set__(self, element: Any, value: Any) -> None:
        owner = f"{type(element).__name__} {getattr(element, 'name', '?')!r}"
        setattr(element, self.slot, self.check(value, self.name, owner))


def renamed_state(state: dict, cls: type) -> dict:
    """A copy of an element's pickled ``state`` in which each attribute that ``cls`` now checks (a
    :class:`Checked` or a property of it) is kept as ``_<name>``, where they read it: an element pickled before they
    were checked kept them under their own names. (A copy: ``copy.copy`` hands over the original's own dict.)"""
    out = dict(state)
    for key in state:
        if not key.startswith("_") and isinstance(getattr(cls, key, None), (Checked, property)):
            out[f"_{key}"] = out.pop(key)
    return out


#: each element type's checked attributes (name, descriptor), in the order of its class hierarchy
_CHECKED: dict[type, list[tuple[str, Checked]]] = {}


def _checked_attributes(kind: type) -> list[tuple[str, Checked]]:
    if kind not in _CHECKED:
        seen: dict[str, Checked] = {}
        for klass in reversed(kind.__mro__):
            seen.update({k: d for k, d in vars(klass).items() if isinstance(d, Checked)})
        _CHECKED[kind] = list(seen.items())
    return _CHECKED[kind]


def recheck(elements: list) -> None:
    """Check again the array attributes of ``elements`` that :class:`Checked` keeps, which an in-place edit
    (``particle.position[0] = nan``, ``joint.axis[:] = 0``) changed past their check: one vectorised test that
    every value is finite, every unit vector still one and every orientation a rotation, and only if not, each
    attribute set again through its check (the ValueError naming the element, or a unit axis or a nearly
    orthonormal orientation made exact again). O(elements).

    Raises
    ------
    ValueError
        From the attribute's own check, naming the element.
    """
    arrays, units, turns = [], [], []
    for e in elements:
        for name, d in _checked_attributes(type(e)):
            value = e.__dict__.get(d.slot)
            if type(value) is np.ndarray and value.dtype.kind == "f":
                (units if d.check is unit else arrays).append(value.ravel())
                if name == "orientation" and value.shape == (3, 3):
                    turns.append(value)
    ok = True
    if arrays:
        ok = bool(np.isfinite(np.concatenate(arrays)).all())
    if ok and units:
        u = np.array(units)
        ok = bool(np.all(np.abs(np.einsum("ij,ij->i", u, u) - 1.0) < 1e-12))
    if ok and turns:  # a rotation still: RᵀR = I, det R = 1 (to the setter's own tolerance, or tighter)
        R = np.array(turns)
        ok = bool(np.all(np.abs(np.einsum("kji,kjl->kil", R, R) - np.eye(3)) < 1e-9)) and bool(
            np.all(np.linalg.det(R) > 0))
    if ok:
        return
    for e in elements:
        for _, d in _checked_attributes(type(e)):
            value = e.__dict__.get(d.slot)
            if type(value) is np.ndarray:
                d.__set__(e, value.copy())
