"""Slot numbers of the engine's flat arrays (MuJoCo's mjModel/mjData idea).

The model is two arrays: ``I`` (int64) and ``F`` (float64). ``I[:NSLOTS]`` is
a header: sizes, flags and the offsets of every constant array inside ``I``
or ``F``. A kernel reads ``I[UR]`` to find where the U-map rows start.
Passing two arrays instead of a structure of fifty keeps a compiled call
cheap (numba passes a structure's arrays one by one).

The run workspace is the same idea: ``WI`` (int64) holds offsets and the
run's integer state, ``WS`` (float64) every buffer.
"""

# --- model header (I[slot]) -------------------------------------------------------------------------
# sizes and flags
(NQ, N, SAME, SIZE_L, DENSE_OK, HAS_F, HAS_VF, NU, NW, NNZ, NPAIR,
 # offsets of int arrays in I
 UR, UC, UPOS, WR, WC, WPOS, PROW, PCOL, PA, PB, TSTART, PERM, FIRST, ROWSTART, COLPTR, COLROWS, COLPOS,
 # offsets of float arrays in F
 W, UV, SU, WV, SW, CU, CW, S, KK, SCALE, ROUND, AW, GVEC,
 # affine maps: idx offset (I), weights and constants (F), count, terms
 SP_I, SP_W, SP_C, SP_M, SP_K,
 DP_I, DP_W, DP_C, DP_M, DP_K,
 DR_I, DR_W, DR_C, DR_M, DR_K,
 PF_I, PF_W, PF_C, PF_M, PF_K,
 T1_I, T1_W, T1_C, T1_M, T1_K,
 T2_I, T2_W, T2_C, T2_M, T2_K,
 TW_I, TW_W, TW_C, TW_M, TW_K,
 HD_I, HD_W, HD_C, HD_M, HD_K,
 SN_I, SN_W, SN_C, SN_M, SN_K,
 SD_I, SD_W, SD_C, SD_M, SD_K,
 BA_I, BA_W, BA_C, BA_M, BA_K,
 BB_I, BB_W, BB_C, BB_M, BB_K,
 # per-instance arrays
 SP_STIFF, SP_REST, TS_STIFF, TS_REST, DP_COEF, DR_COEF, PF_FORCE, TQ_M, TQ_COLS, TQ_TAU,
 HD_CA, HD_CB, HD_RA, HD_RB, HD_COEF, SD_COEF, BE_KAPPA,
 # U computed once for rows of one U map (see model._u_aliases): its terms without the repeats (count, rows,
 # columns, weights), then the repeating rows and the rows they copy
 NU1, U1R, U1C, U1V, NALIAS, ALIAS_DST, ALIAS_SRC,
 # 1 when G's pattern lists its entries row by row; then where each row's entries start (N + 1)
 GSORTED, GROWPTR,
 # G's pattern by columns: where each column's entries start (NQ + 1), its entries in pattern order (NNZ)
 # and their rows (NNZ)
 GCOLPTR, GCOLENT, GCOLROW,
 NSLOTS) = range(131)  # fmt: skip

#: the affine maps, by family prefix
MAPS = ("SP", "DP", "DR", "PF", "T1", "T2", "TW", "HD", "SN", "SD", "BA", "BB")

# --- workspace header (WI[slot]) ----------------------------------------------------------------------
(X_U, X_W, X_G, X_GD, X_AB, X_LAMV, X_DL, X_TMP, X_RHS, X_Q1, X_VH, X_VFREE, X_VNEW, X_GRAD, X_F0, X_F1,
 X_CORR, X_DQ, X_WORK, X_QB, X_VB, X_QM,
 SIZE_AB,
 CUR, HAVE_FACTOR, HAVE_GRAD, SHIFT_USED, NEWTON_USED, REFINED, STIFF,
 # constrained drifts of the Lie loop so far (a counter, for profiling); the Lie loop's force is constant;
 # steps since SHAKE's factor of A was made; refactor at the next step; factorizations so far (a counter);
 # the Lie loop's history of the impulses M⁻¹GᵀΛ of the last steps: rows known, row of the newest
 DRIFTS, CONST_FORCE, FACTOR_AGE, REFRESH, REFACTORED, Z_KNOWN, Z_HEAD,
 XSLOTS) = range(38)  # fmt: skip

# --- SHAKE's warm starts (rows of a run's ``lam``) ---------------------------------------------------------
#: row 0: the last step's multipliers; row 1: Yoshida's middle substep's; rows 2 … 5: the multipliers of
#: the last four steps before row 0's, newest first (NaN: unknown), to extrapolate from
WARM_ROWS, WARM_HISTORY = 6, 2

# --- status codes of a run ------------------------------------------------------------------------------
DONE, SHAKE_FAILED, NONFINITE, DRIFT_FAILED, NEEDS_NUMPY = range(5)
