"""``python -m mbvi``: the command line (see :mod:`mbvi.cli`)."""

import sys

from mbvi.cli import main

if __name__ == "__main__":
    sys.exit(main())
