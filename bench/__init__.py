"""The namesrv-fleet benchmark harness: ``make bench`` (``python -m bench``).

It starts Redis, a fleet of workers and a bare ceiling server as separate processes on loopback,
drives them with a pool of load generator processes and the broker simulator, and prints one
table of every measurement against its target (also written as JSON under ``bench/results/``).
See ``bench/README.md``.
"""
