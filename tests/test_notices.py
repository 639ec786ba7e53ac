"""mbvi.notices: a run's warnings kept per thread, for the runs a caller cannot see (a sweep's members)."""

from __future__ import annotations

import threading
import warnings

from mbvi import notices


def test_each_thread_keeps_its_own_warnings_and_they_are_still_given() -> None:
    """Two members warning side by side (Dask's threads) keep their own messages, in order and each once, with
    the process's warning filters untouched (``catch_warnings`` would race on them)."""
    start = threading.Barrier(2)
    kept: dict[str, list[str]] = {}

    def member(name: str) -> None:
        with notices.kept() as notes:
            start.wait()
            for i in range(200):
                notices.warn(f"{name} {i % 50}", RuntimeWarning)
            kept[name] = list(notes)

    filters = list(warnings.filters)
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=member, args=(name,)) for name in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        notices.warn("outside any member", RuntimeWarning)  # kept by no one
    assert kept["a"] == [f"a {i}" for i in range(50)] and kept["b"] == [f"b {i}" for i in range(50)]
    assert len(given) == 401 and str(given[-1].message) == "outside any member"
    assert warnings.filters == filters


def test_a_warning_points_at_the_caller_as_warnings_warn_does() -> None:
    def library_function() -> None:
        notices.warn("look here", UserWarning, stacklevel=2)

    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")
        library_function()
    assert given[0].filename == __file__ and given[0].category is UserWarning


def test_a_quiet_watch_keeps_the_messages_without_giving_them() -> None:
    """A batch or a sweep speaks for its members once: their own warnings are kept, not given again besides."""
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")
        with notices.kept(quiet=True) as notes:
            notices.warn("a member's", RuntimeWarning)
        notices.warn("after the watch", RuntimeWarning)
    assert notes == ["a member's"] and [str(w.message) for w in given] == ["after the watch"]


def test_warnings_given_deep_inside_a_run_point_at_the_users_call() -> None:
    """The four-bar's redundant rows are found in the assembly, two calls under simulate: the warning pointed at
    mbvi/simulate.py; so did a Lagrangian system's projected initial velocities."""
    import sympy as sp
    from scene_loader import load_scene

    import mbvi

    x, y, vx, vy = sp.symbols("x y v_x v_y")
    off = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - 9.81 * y, [x, y], [vx, vy], constraints=[x**2 + y**2 - 1],
                                initial_state=mbvi.State([1.0, 0.0], [1.0, 0.0]))  # fmt: skip
    for run in (
        lambda: mbvi.simulate(load_scene("four_bar").build(), 0.01, 1e-3),
        lambda: mbvi.simulate(off, 0.01, 1e-3),
    ):
        with warnings.catch_warnings(record=True) as given:
            warnings.simplefilter("always")
            run()
        assert given and {w.filename for w in given} == {__file__}, [(w.filename, str(w.message)) for w in given]
