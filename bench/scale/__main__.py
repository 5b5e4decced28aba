"""``python -m bench.scale [flags]`` (``make bench-scale``)."""

from __future__ import annotations

from bench.scale.run import main

raise SystemExit(main())
