"""Route history on PySpark: the registry's change log in, answers out.

``python -m namesrv.pipeline run EXPORT_DIR --out TABLES_DIR [--as-of TIME] [--report DIR]``
(or ``spark-submit .../namesrv/pipeline/__main__.py run ...``). Modules:

* :mod:`.schemas` every StructType; :mod:`.io` the only code that touches paths;
  :mod:`.kinds` the event kinds and their required fields;
* :mod:`.parse` lines → checked records; :mod:`.dedup` → typed events + rejects;
  :mod:`.brokers` sessions, availability, heartbeat gaps, flapping; :mod:`.topics` queue
  history, writability; :mod:`.registry_history` registry size, route as of an instant — all
  pure ``DataFrame -> DataFrame`` functions;
* :mod:`.job` ``run(spark, cfg)``; :mod:`.report` Markdown report (:mod:`.report_text`,
  :mod:`.report_plots`); :mod:`.synth` the synthetic history generator (:mod:`.registry_model`
  of the Lua scripts, :mod:`.sinks` the export's files); :mod:`.cli` the command line.

Importing this package does not import PySpark (the generator runs without it).
"""

from __future__ import annotations
