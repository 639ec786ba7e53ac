"""The compiled engine: the RATTLE family's whole time loop as one numba call.

* :mod:`mbvi.engine.model` flattens a :class:`mbvi.System` into constant
  arrays (the model, MuJoCo's ``mjModel``);
* :mod:`mbvi.engine.kernels` evaluates constraints, the banded factorization
  of G M⁻¹ Gᵀ and every force family on those arrays;
* :mod:`mbvi.engine.loop` is the time loop, for one system and, in parallel,
  for a batch of states (the per-run workspace, MuJoCo's ``mjData``, lives
  inside it); :mod:`mbvi.engine.lockstep` steps chunks of a batch's members
  together, members on the inner (SIMD) axis;
* :mod:`mbvi.engine.runner` calls it and turns its status into results or a
  :class:`mbvi.SolverError`.

numba is imported only when a run first needs it, so ``import mbvi`` stays light.
Compiled code is cached on disk (``cache=True``): a machine compiles once
(:mod:`mbvi.engine.cache` keeps that cache consistent with the sources).
"""
