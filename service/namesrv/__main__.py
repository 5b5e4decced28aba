from __future__ import annotations

import sys

from namesrv.cli import main

sys.exit(main())
