"""Every field of the engine's flat arrays, declared once: name, type, size and meaning.

MuJoCo declares each field of ``mjModel``/``mjData`` once, in ``mjxmacro.h``
(``X(int, jnt_type, njnt, 1)``), and generates the rest from that table. The
engine does the same: each table below lists its fields in slot order, and
everything else comes from it — the slot numbers kernels index with
(``I[M.NQ]``, ``WI[WK.CUR]``), the allocation of workspaces
(:func:`allocate`), the checks of the model packer (every declared array
given, every length as declared) and the reference page ``docs/engine-fields.md``
(:func:`markdown`).

A table is a namespace: ``M.NQ`` is the slot of the model's coordinate
count. It is a module object, so numba folds ``M.NQ`` to a constant in
compiled code. Each table has its own name, so no two fields collide:

====  ===============================================================================
M     the model header ``I[:M.count]`` (:mod:`mbvi.engine.model`): sizes, flags and the offsets of
      the constant arrays in ``I`` (int64) and ``F`` (float64)
WK    a run's workspace (``WI``, ``WS``): offsets of the float buffers in ``WS``, and the run's
      integer state in ``WI``
LT    the rigid-body tables ``IL``/``FL`` of :mod:`mbvi.engine.lie`
LB    the float buffers of a rigid-body run (a tuple, :mod:`mbvi.engine.lieloop`)
LN    the lane buffers of a lockstep chunk (rows × members, :mod:`mbvi.engine.lockstep`)
LF    per-member float scalars of a lockstep chunk
LI    per-member int scalars of a lockstep chunk
ST    the status of a run (:mod:`mbvi.engine.loop`)
RI    the run-info counters a run reports (``info``)
RK    the integer arguments of a run (``steps``)
RF    the float arguments of a run (``params``)
====  ===============================================================================

Sizes are expressions of the model's sizes (``N`` constraint rows, ``NQ``
coordinates, ``NNZ`` Jacobian entries, ``SIZE_L`` profile entries, ``NV``
velocity coordinates, ``NB`` rigid bodies, …), evaluated by :func:`length`.
"""

from __future__ import annotations

import functools
import importlib
import sys
import types
from dataclasses import dataclass

__all__ = [
    "LB", "LF", "LI", "LN", "LT", "RF", "RI", "RK", "ST", "TABLES", "WARM_HISTORY", "WARM_ROWS", "WK", "Field", "M",
    "Table", "allocate", "length", "markdown",
]  # fmt: skip

#: the kinds of field: a header value, an int array (in I), a float array (in F), a float buffer of a
#: workspace (its offset in WI), an integer of a workspace's state (in WI), a row of a tuple of buffers,
#: a code (an enumeration value)
KINDS = ("size", "int", "float", "buffer", "state", "row", "code")


@dataclass(frozen=True)
class Field:
    """One declared field: its slot is its position in the table."""

    name: str
    kind: str
    size: str
    doc: str


class Table(types.ModuleType):
    """A namespace of fields: ``table.NAME`` is a field's slot, ``table.count`` the number of slots.

    Parameters
    ----------
    name : str
        The namespace (``"M"``, ``"WK"``, …).
    title : str
        What the table describes (one line, for the docs).
    fields : list of Field
        In slot order.
    """

    def __init__(self, name: str, title: str, fields: list[Field]) -> None:
        super().__init__(f"mbvi.engine.fields.{name}", title)
        seen: set[str] = set()
        for i, f in enumerate(fields):
            if f.kind not in KINDS:
                raise ValueError(f"{name}.{f.name}: unknown kind {f.kind!r}")
            if f.name in seen or f.name in ("count", "fields", "title", "slot_of", "field"):
                raise ValueError(f"{name}.{f.name}: declared twice (or a reserved name)")
            seen.add(f.name)
            setattr(self, f.name, i)
        self.title = title
        self.fields = tuple(fields)
        self.count = len(fields)
        # importable by its name, so that pickles of compiled functions that read it (numba's cache index of a
        # function taking another as an argument) refer to it instead of copying it
        sys.modules[self.__name__] = self

    def __reduce__(self):
        return (importlib.import_module, (self.__name__,))  # by reference: the table of this module

    def field(self, slot: int) -> Field:
        """The field at ``slot``."""
        return self.fields[slot]

    def __repr__(self) -> str:
        return f"<field table {self.__name__.rsplit('.', 1)[-1]}: {self.count} fields>"


def _f(kind: str):
    def make(name: str, *rest: str) -> Field:
        size, doc = ("", rest[0]) if len(rest) == 1 else rest
        return Field(name, kind, size, doc)

    return make


size, ints, floats, buffer, state, row, code = (_f(k) for k in KINDS)


def affine(prefix: str, what: str) -> list[Field]:
    """The five slots of an affine map family ``P_i(q) = Σ_k w_ik q[idx_ik : idx_ik + 3] + c_i`` (one a point)."""
    return [
        ints(f"{prefix}_I", f"{prefix}_M*{prefix}_K", f"{what}: first coordinate of each term (instance-major)"),
        floats(f"{prefix}_W", f"{prefix}_M*{prefix}_K", f"{what}: weight of each term (0 pads an instance)"),
        floats(f"{prefix}_C", f"3*{prefix}_M", f"{what}: constant part of each instance, m"),
        size(f"{prefix}_M", f"{what}: number of instances"),
        size(f"{prefix}_K", f"{what}: terms per instance"),
    ]


# ------------------------------------------------------------------------------------------------- model
M = Table(
    "M",
    "the model header I[:M.count]: sizes, flags and offsets of the constant arrays in I and F",
    [
        size("NQ", "coordinates the rows act on (nq; nv in a velocity-coordinate model)"),
        size("N", "active constraint rows"),
        size("SAME", "1 when every row's W map is its U map (g = s |U|² − k)"),
        size("SIZE_L", "entries of the profile (envelope) of the Cholesky factor of A = G M⁻¹ Gᵀ"),
        size("DENSE_OK", "1 when the rows are few enough for the dense full-Newton fallbacks"),
        size("HAS_F", "1 when some force law has a non-conservative force"),
        size("HAS_VF", "1 when some non-conservative force depends on the velocity"),
        size("NU", "terms of the U maps"),
        size("NW", "terms of the W maps"),
        size("NNZ", "entries of G's sparsity pattern"),
        size("NPAIR", "entry pairs (a, b) of G that make A = G M⁻¹ Gᵀ (lower triangle)"),
        ints("UR", "NU", "U term: its component 3 r + c of the stacked U"),
        ints("UC", "NU", "U term: the coordinate it multiplies"),
        ints("UPOS", "NU", "U term: the entry of G's pattern it adds to"),
        ints("WR", "NW", "W term: its component of the stacked W"),
        ints("WC", "NW", "W term: the coordinate it multiplies"),
        ints("WPOS", "NW", "W term: the entry of G's pattern it adds to"),
        ints("PROW", "NNZ", "G's pattern: row of each entry"),
        ints("PCOL", "NNZ", "G's pattern: column of each entry"),
        ints("PA", "NPAIR", "A's pairs: first entry of G"),
        ints("PB", "NPAIR", "A's pairs: second entry of G"),
        ints("TSTART", "SIZE_L+1", "where each profile entry's pairs start (pairs sorted by entry)"),
        ints("PERM", "N", "Cuthill–McKee order of the rows (row i of the factor is row PERM[i] of A)"),
        ints("FIRST", "N", "first column of each factor row's envelope"),
        ints("ROWSTART", "N", "where each factor row starts in the profile storage"),
        ints("COLPTR", "N+1", "the envelope by columns: where each column's rows start"),
        ints("COLROWS", "SIZE_L-N", "the envelope by columns: rows k > j with FIRST[k] ≤ j"),
        ints("COLPOS", "SIZE_L-N", "the envelope by columns: position of L[k, j] in the profile storage"),
        floats("W", "NQ", "inverse mass M⁻¹ (diagonal), 1/kg or 1/(kg m²)"),
        floats("UV", "NU", "U term: its weight"),
        floats("SU", "NU", "U term: s times its weight (2 s when W is U): its coefficient in G"),
        floats("WV", "NW", "W term: its weight"),
        floats("SW", "NW", "W term: s times its weight: its coefficient in G"),
        floats("CU", "3*N", "constant part of each row's U, m"),
        floats("CW", "3*N", "constant part of each row's W, m"),
        floats("S", "N", "row factor s of g = s U·W − k"),
        floats("KK", "N", "row constant k of g = s U·W − k"),
        floats("SCALE", "N", "natural size of each row (m for lengths, 1 for directions)"),
        floats("ROUND", "N", "round-off each row keeps at the initial configuration (never asked of a solver)"),
        floats("AW", "NPAIR", "A's pairs: the inverse mass of their shared column"),
        floats("GVEC", "NQ", "gravity's generalized force m g on every translation, N"),
        *affine("SP", "springs: the difference of their anchor points"),
        *affine("DP", "dampers: the difference of their anchor points"),
        *affine("DR", "drag: the point it acts at"),
        *affine("PF", "constant point forces: the point they act at"),
        *affine("T1", "torsion springs: u₁ of body a"),
        *affine("T2", "torsion springs: u₂ of body a"),
        *affine("TW", "torsion springs: u₁ of body b"),
        *affine("HD", "revolute joint damping: the joint axis"),
        *affine("SN", "prismatic joint damping: the joint axis"),
        *affine("SD", "prismatic joint damping: the difference of the anchor points"),
        *affine("BA", "beam bending: the first edge"),
        *affine("BB", "beam bending: the second edge"),
        floats("SP_STIFF", "SP_M", "spring stiffness k, N/m"),
        floats("SP_REST", "SP_M", "spring rest length, m"),
        floats("TS_STIFF", "T1_M", "torsion spring stiffness, N m/rad"),
        floats("TS_REST", "T1_M", "torsion spring rest angle, rad"),
        floats("DP_COEF", "DP_M", "damping coefficient c, N s/m"),
        floats("DR_COEF", "DR_M", "drag coefficient c, N s/m"),
        floats("PF_FORCE", "3*PF_M", "constant world force of each point force, N"),
        size("TQ_M", "constant torques: number of instances"),
        ints("TQ_COLS", "9*TQ_M", "constant torques: the nine rotation-column coordinates of the body"),
        floats("TQ_TAU", "3*TQ_M", "constant torques: world torque, N m"),
        ints("HD_CA", "9*HD_M", "revolute joint damping: rotation columns of body a"),
        ints("HD_CB", "9*HD_M", "revolute joint damping: rotation columns of body b"),
        floats("HD_RA", "HD_M", "revolute joint damping: 1 when body a turns (a rigid body), else 0"),
        floats("HD_RB", "HD_M", "revolute joint damping: 1 when body b turns (a rigid body), else 0"),
        floats("HD_COEF", "HD_M", "revolute joint damping coefficient b, N m s/rad"),
        floats("SD_COEF", "SN_M", "prismatic joint damping coefficient b, N s/m"),
        floats("BE_KAPPA", "BA_M", "bending stiffness κ of U = κ (1 − êₐ·ê_b), J"),
        size("NU1", "terms of the U map without the rows that repeat an earlier row's (U computed once)"),
        ints("U1R", "NU1", "U computed once: component of each term"),
        ints("U1C", "NU1", "U computed once: coordinate of each term"),
        floats("U1V", "NU1", "U computed once: weight of each term"),
        size("NALIAS", "rows whose U repeats an earlier row's"),
        ints("ALIAS_DST", "NALIAS", "the rows whose U is copied"),
        ints("ALIAS_SRC", "NALIAS", "the rows they copy it from"),
        size("GSORTED", "1 when G's pattern lists its entries row by row"),
        ints("GROWPTR", "N+1", "where each row's entries start (when GSORTED)"),
        ints("GCOLPTR", "NQ+1", "G by columns: where each column's entries start"),
        ints("GCOLENT", "NNZ", "G by columns: its entries in pattern order"),
        ints("GCOLROW", "NNZ", "G by columns: the row of each"),
        size("KN", "kernels of the contract (mbvi.engine.contract) the engine calls through their address"),
        ints("KADDR", "KN", "each kernel's address (a C function of mbvi.engine.callbacks.SIGNATURE)"),
        ints("KROLE", "KN", "each kernel's role: 0 force, 1 gradient, 2 potential"),
        ints("KIO", "KN", "where each kernel's int parameters start in I"),
        ints("KIN", "KN", "how many int parameters it has"),
        ints("KFO", "KN", "where each kernel's float parameters start in F"),
        ints("KFN", "KN", "how many float parameters it has"),
        size("KGRAD", "1 when a kernel adds to ∇U (the Lie loop's force is then not constant)"),
        ints("WKOFF", "WK_COUNT", "the run workspace's layout: WI of a new run (offsets of WK's buffers in WS)"),
        size("WS_SIZE", "the length of a run's float workspace WS"),
        # new slots go last: a plugin's step kernel cached against an earlier table keeps its offsets
        ints("SD_CC", "9*SN_M", "prismatic joint damping: rotation columns of the body taking the couple (a, else b)"),
        floats("SD_RC", "SN_M", "prismatic joint damping: 1 when a body of the joint is rigid (takes the couple)"),
    ],
)

#: the affine map families, by prefix
MAPS = ("SP", "DP", "DR", "PF", "T1", "T2", "TW", "HD", "SN", "SD", "BA", "BB")

# --------------------------------------------------------------------------------------------- workspace
WK = Table(
    "WK",
    "a run's workspace: WI[slot] is a float buffer's offset in WS, or an integer of the run's state",
    [
        buffer("U", "3*N", "U of every row (the Lie loop: U then W, 6 N)"),
        buffer("W", "3*N", "W of every row"),
        buffer("G", "N", "constraint values g"),
        buffer("GD", "2*NNZ", "G's values on its pattern, two slots (the current and the next configuration)"),
        buffer("AB", "2*SIZE_L", "the profile Cholesky factor of A, two slots"),
        buffer("LAMV", "N", "SHAKE's multipliers Λ being solved for"),
        buffer("DL", "N", "a Newton update ΔΛ"),
        buffer("TMP", "N", "scratch of the triangular solves"),
        buffer("RHS", "N", "a right-hand side"),
        buffer("Q1", "NQ", "the configuration at the end of a drift"),
        buffer("VH", "NQ", "the drift velocity v½"),
        buffer("VFREE", "NQ", "the free velocity before the constraint impulse"),
        buffer("VNEW", "NQ", "a fixed-point iterate of v½"),
        buffer("GRAD", "2*NQ", "∇U at the current and the next configuration"),
        buffer("F0", "NQ", "the non-conservative force at the step's start"),
        buffer("F1", "NQ", "the non-conservative force at the step's end (before it: the fixed point's last residual)"),
        buffer("CORR", "NQ", "the accumulated correction M⁻¹ Gᵀ Λ of a drift"),
        buffer("DQ", "NQ", "one correction M⁻¹ Gᵀ ΔΛ"),
        buffer("WORK", "1", "the work of the non-conservative forces so far, J"),
        buffer("QB", "NQ", "the configuration at the step's start (restored when the step fails)"),
        buffer("VB", "NQ", "the velocity at the step's start"),
        buffer("QM", "NQ", "the implicit pair's evaluation point (the RATTLE family: the fixed point's last g(x))"),
        buffer("QF", "NQ", "the configuration of the plugin API's last factor of A (mbvi.engine.api)"),
        state("SIZE_AB", "entries of one factor slot (SIZE_L)"),
        state("CUR", "the factor slot of the current configuration (0 or 1)"),
        state("HAVE_FACTOR", "1 when slot CUR holds the factor at the current configuration"),
        state("HAVE_GRAD", "1 when GRAD's slot CUR holds ∇U at the current configuration"),
        state("SHIFT_USED", "factorizations of a singular A (shifted: least-squares multipliers), a counter"),
        state("NEWTON_USED", "full-Newton fallbacks of SHAKE and the implicit pair, a counter"),
        state("REFINED", "steps taken in substeps because a body turned fast, a counter"),
        state("STIFF", "steps left that the implicit pair takes straight by Newton"),
        state("DRIFTS", "constrained drifts of the Lie loop, a counter (for profiling)"),
        state("CONST_FORCE", "1 when the Lie loop's generalized force is constant (gravity on centres only)"),
        state("FACTOR_AGE", "steps since SHAKE's factor of A was made (Lie loop)"),
        state("REFRESH", "1: refactor at the next step (Lie loop)"),
        state("REFACTORED", "factorizations so far, a counter"),
        state("Z_KNOWN", "rows known of the Lie loop's impulse history"),
        state("Z_HEAD", "the row of its newest impulse"),
        state("PIECES", "the substeps every step of the Lie loop takes from now on (it only grows)"),
        state("API_FACTOR", "1 when the plugin API's factor of A (slot 0) is that at QF (mbvi.engine.api)"),
    ],
)

# ----------------------------------------------------------------------------------- rigid-body tables
LT = Table(
    "LT",
    "the rigid-body tables IL (header, then int arrays) and FL (floats) of mbvi.engine.lie",
    [
        size("NB", "rigid bodies"),
        size("NV", "velocity coordinates (3 per particle, 6 per rigid body)"),
        size("NT", "translational coordinates"),
        size("NCOPY", "entries of G_v copied from an entry of G"),
        size("NROT", "product terms of G_v from G's rotation-column entries"),
        ints("BQ", "NB", "each body's offset in q"),
        ints("BV", "NB", "each body's offset in the velocity coordinates"),
        ints("TQ", "NT", "translational coordinates: index in q"),
        ints("TV", "NT", "translational coordinates: index in u"),
        ints("CQ", "NCOPY", "copies: the entry of G"),
        ints("CV", "NCOPY", "copies: the entry of G_v"),
        ints("RV", "NROT", "product terms: the entry of G_v"),
        ints("RQ", "NROT", "product terms: the entry of G"),
        ints("RR", "NROT", "product terms: the rotation-column coordinate it multiplies"),
        floats("J", "3*NB", "principal moments of inertia, by rows (3, NB), kg m²"),
        floats("RS", "NROT", "product terms: their sign (±1)"),
        size("FUSED", "most terms of an entry of G in the fused map (0: not fused)"),
        ints("FCS", "FUSED*NCOPY", "fused map, copies: the U/W component of each term"),
        ints("FRS", "FUSED*NROT", "fused map, products: the U/W component of each term"),
        floats("FCC", "FUSED*NCOPY", "fused map, copies: coefficient of each term"),
        floats("FRC", "FUSED*NROT", "fused map, products: coefficient of each term (sign folded in)"),
        size("ROT3", "1: product terms come in threes; 2: besides, each entry of G_v is one copy or one three"),
    ],
)

LB = Table(
    "LB",
    "the float buffers of a rigid-body run (a tuple, in this order)",
    [
        row("GDQ", "NNZ", "G's values in configuration coordinates"),
        row("Q1", "NQ", "the configuration at the end of a drift"),
        row("GRAD0", "NQ", "∇U at the step's start"),
        row("GRAD1", "NQ", "∇U at the step's end"),
        row("FQ", "NQ", "a generalized force on q"),
        row("VQ", "NQ", "a velocity in q's coordinates"),
        row("UFREE", "NV", "the free velocity before the constraint impulse"),
        row("UH", "NV", "the drift velocity u½"),
        row("UA", "NV", "the velocity after the drift"),
        row("UNEW", "NV", "a fixed-point iterate"),
        row("FV0", "NV", "the non-conservative force at the step's start, velocity coordinates"),
        row("FV1", "NV", "the non-conservative force at the step's end"),
        row("DV", "NV", "an impulse M_v⁻¹ G_vᵀ Λ"),
        row("TMPV", "NV", "the total force of a kick"),
        row("UM", "NV", "the step's mean velocity"),
        row("X", "6*max(NB,1)", "each body's Cayley parameters"),
        row("FC", "NV", "the constant force (CONST_FORCE)"),
        row("DL2", "max(N,1)", "scratch of the refined solve"),
        row("ZH", "5*NV", "the impulses of the last five steps (a ring)"),
        row("CW", "3*max(NB,1)", "the bodies' rates in the all-at-once Cayley step"),
        row("CC", "13*max(NB,1)", "its scratch"),
        row("QB", "NQ", "the configuration at the step's start (the last good state)"),
        row("UB", "NV", "the velocity at the step's start"),
        row("QS", "NQ", "the configuration before a refined step's substeps"),
        row("US", "NV", "the velocity before them"),
        row("UO", "NV", "the projection of u onto the joints (what a saved state's velocity is made of)"),
        row("GP", "NV", "a velocity fixed point's last g(x) (its Anderson mixing, mbvi.engine.kernels.settle_mixed)"),
        row("RP", "NV", "the fixed point's last residual g(x) − x"),
    ],
)

# ------------------------------------------------------------------------------------------- lockstep
LN = Table(
    "LN",
    "the lane buffers (rows, members) of a lockstep chunk",
    [
        row("Q", "NQ", "configuration"),
        row("V", "NQ", "velocity"),
        row("QB", "NQ", "configuration at the step's start"),
        row("VB", "NQ", "velocity at the step's start"),
        row("Q1", "NQ", "the configuration at the end of a drift"),
        row("VH", "NQ", "the drift velocity v½"),
        row("VFREE", "NQ", "the free velocity"),
        row("VNEW", "NQ", "a fixed-point iterate of v½"),
        row("F0", "NQ", "the non-conservative force at the step's start"),
        row("F1", "NQ", "the non-conservative force at the step's end"),
        row("GR0", "NQ", "∇U at the step's start"),
        row("GR1", "NQ", "∇U at the step's end"),
        row("CORR", "NQ", "the accumulated correction of a drift"),
        row("DQ", "NQ", "one correction"),
        row("U", "3*N", "U of every row"),
        row("W", "3*N", "W of every row"),
        row("G", "N", "constraint values"),
        row("LAMV", "N", "SHAKE's multipliers"),
        row("DL", "N", "a Newton update"),
        row("TMP", "N", "scratch of the solves"),
        row("RHS", "N", "a right-hand side"),
    ],
)

LF = Table(
    "LF",
    "per-member float scalars of a lockstep chunk (rows of an (LF.count, members) array)",
    [
        row("WORK", "1", "the work so far, J"),
        row("WORKB", "1", "the work at the step's start"),
        row("R", "1", "SHAKE's residual"),
        row("PREV", "1", "its previous residual"),
        row("FPREV", "1", "the fixed point's previous change"),
        row("FFLOOR", "1", "the fixed point's round-off floor (of the start velocity and its kick)"),
        row("E0", "1", "miss of order 0 of the warm start"),
        row("E1", "1", "miss of order 1"),
        row("E2", "1", "miss of order 2"),
        row("E3", "1", "miss of order 3"),
        row("FIN", "1", "0 when the member's state is finite"),
    ],
)

LI = Table(
    "LI",
    "per-member int scalars of a lockstep chunk (rows of an (LI.count, members) array)",
    [
        row("ACT", "1", "1 while the member is on the common path"),
        row("BAD", "1", "1 when the member must leave it"),
        row("GOING", "1", "1 while its SHAKE iterates"),
        row("SLOW", "1", "iterations its SHAKE contracted slowly"),
        row("FIXED", "1", "1 while its fixed point iterates"),
        row("COLD", "1", "1 when its warm start is cold"),
        row("ORDER", "1", "the order of its warm start's extrapolation"),
    ],
)

# ------------------------------------------------------------------------------------------ outcomes
ST = Table(
    "ST",
    "the status of a run or a step",
    [
        code("DONE", "every step taken"),
        code("SHAKE_FAILED", "a constrained drift did not converge"),
        code("NONFINITE", "a state became non-finite (the run blew up)"),
        code("DRIFT_FAILED", "the fixed point of a velocity-dependent drift did not settle"),
        code("NEEDS_NUMPY", "a solve too large for the dense fallbacks: the NumPy path takes the step"),
    ],
)

RI = Table(
    "RI",
    "what a run reports in its ``info`` (int64)",
    [
        code("STATUS", "the run's status (ST)"),
        code("STEP", "the step reached: the failing one, or the last"),
        code("SAVED", "the next save slot"),
        code("SHIFTED", "factorizations of a singular A (added)"),
        code("NEWTON", "full-Newton fallbacks (added)"),
        code("REFINED", "steps taken in substeps (added)"),
    ],
)

#: rows of a run's SHAKE warm starts ``lam``: row 0 the last step's multipliers, row 1 Yoshida's middle
#: substep's, rows 2 … 5 the multipliers of the four steps before row 0's, newest first (NaN: unknown)
WARM_ROWS, WARM_HISTORY = 6, 2

RK = Table(
    "RK",
    "the integer arguments of a compiled run (an int64 array)",
    [
        code("K0", "the first step to take"),
        code("KSTOP", "the step to stop before"),
        code("NSTEPS", "the run's number of steps (the last state is saved)"),
        code("SAVE_EVERY", "save every n-th state"),
        code("J0", "the next save slot"),
        code("MAXITER", "Newton iterations per solve"),
        code("FRESH", "1: the workspace starts here (a state it did not step to): initialize it"),
        code("PROJECT", "1: project the velocity onto the constraints first (and save it at J0 − 1)"),
    ],
)

RF = Table(
    "RF",
    "the float arguments of a compiled run (a float64 array)",
    [
        code("T0", "the time of step 0, s"),
        code("H", "the step, s"),
        code("TOL", "the relative constraint tolerance"),
        code("LENGTH", "the system's length scale, m"),
        code("MAX_TURN", "the turn of a body in a step above which it is taken in substeps, rad"),
    ],
)

TABLES = (M, WK, LT, LB, LN, LF, LI, ST, RI, RK, RF)


def length(expr: str, sizes: dict[str, int]) -> int:
    """A field's length from its size expression and the model's sizes (e.g. ``"3*N"`` with ``N = 4`` → 12).

    Raises
    ------
    KeyError
        When the expression names a size not in ``sizes``.
    """
    return int(eval(_size_code(expr), {"__builtins__": {}, "max": max}, dict(sizes)))  # this module's only


@functools.cache
def _size_code(expr: str):
    """A size expression compiled once (a model build evaluates some 360 of them)."""
    return compile(expr, "<field size>", "eval")


def allocate(table: Table, sizes: dict[str, int]):
    """A workspace for ``table`` (WK): (WI, WS) with every buffer's offset in WI and zeroed state.

    Parameters
    ----------
    table : Table
        A table of ``buffer`` and ``state`` fields.
    sizes : dict
        The model's sizes its lengths are written in.
    """
    import numpy as np

    WI = np.zeros(table.count, dtype=np.int64)
    total = 0
    for slot, f in enumerate(table.fields):
        if f.kind == "buffer":
            WI[slot] = total
            total += length(f.size, sizes)
    return WI, np.zeros(total)


def markdown() -> str:
    """The reference page of every table (``docs/engine-fields.md``, checked by the test suite)."""
    lines = [
        "# Engine fields",
        "",
        "<!-- generated by `python -m mbvi.engine.fields`: edit the table in mbvi/engine/fields.py, not this page -->",
        "",
        "Every field of the compiled engine's flat arrays, declared once in `mbvi/engine/fields.py`",
        "(MuJoCo's `mjxmacro.h` idea). Kernels index with the table's names (`I[M.NQ]`, `WI[WK.CUR]`);",
        "sizes are expressions of the model's sizes.",
        "",
    ]
    for t in TABLES:
        short = t.__name__.rsplit(".", 1)[-1]
        lines += [f"## `{short}`: {t.title}", "", "| slot | name | kind | size | meaning |", "|---|---|---|---|---|"]
        for i, f in enumerate(t.fields):
            size_text = f.size.replace("*", "·") or "—"
            doc = f.doc.replace("|", "\\|")  # a pipe inside a table cell
            lines.append(f"| {i} | `{short}.{f.name}` | {f.kind} | {size_text} | {doc} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m mbvi.engine.fields > docs/engine-fields.md
    print(markdown(), end="")
