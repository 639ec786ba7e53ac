"""A rendering worker process: ``python -m mbvi.render._worker`` (started by :func:`mbvi.render.video.render_parallel`).

Reads one pickled job from stdin — the frames, view options, window size,
anti-aliasing, output suffix and the chunks of frames to draw — and writes
each chunk's encoded frames (a pickled list) to stdout, in order. Anything
else that would print to stdout (VTK messages) goes to stderr instead.
"""

from __future__ import annotations

import os
import pickle
import sys


def main() -> None:
    """Run one job from stdin."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # keep the frame pipe clean
    job = pickle.load(sys.stdin.buffer)

    from mbvi.render.api import _grab, _plotter
    from mbvi.render.video import encode_frame
    from mbvi.render.view import SceneView

    plotter = _plotter(job["window_size"], True, job["anti_aliasing"])
    try:
        view = SceneView(plotter, job["data"], trails=job["trails"], **job["opts"])
        for start, stop in job["chunks"]:
            frames = []
            for j in range(start, stop):
                view.show_frame(j)
                frames.append(encode_frame(_grab(plotter), job["suffix"]))
            pickle.dump(frames, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
    finally:
        plotter.close()
        out.close()


if __name__ == "__main__":
    main()
