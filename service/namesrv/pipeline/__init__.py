"""Route history on PySpark: the registry's change log in, answers out.

``python -m namesrv.pipeline run EXPORT_DIR --out TABLES_DIR [--as-of TIME] [--report DIR]``
(or ``spark-submit .../namesrv/pipeline/__main__.py run ...``). Modules:

* :mod:`.schemas` every StructType; :mod:`.io` the only code that touches paths;
* :mod:`.parse` lines → typed events + rejects; :mod:`.brokers` sessions, availability,
  heartbeat gaps, flapping; :mod:`.topics` queue history, writability, registry size, route as
  of an instant — all pure ``DataFrame -> DataFrame`` functions;
* :mod:`.job` ``run(spark, cfg)``; :mod:`.report` Markdown + PNG report; :mod:`.synth` the
  synthetic history generator; :mod:`.cli` the command line.

Importing this package does not import PySpark (the generator runs without it).
"""

from __future__ import annotations
