"""Entry point for ``python -m namesrv.pipeline`` and ``spark-submit .../namesrv/pipeline/__main__.py``
(absolute imports, so it also runs as a plain script when ``namesrv`` is importable)."""

from __future__ import annotations

import sys

from namesrv.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main())
