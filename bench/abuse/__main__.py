"""``python -m bench.abuse``: see :mod:`bench.abuse.run`."""

from __future__ import annotations

import sys

from bench.abuse.run import main

if __name__ == "__main__":
    sys.exit(main())
