"""``make abuse``: every attack of issue #25 as a scripted scenario against a real fleet (Redis and
two worker processes), with legitimate brokers and clients working beside it, one table row per
attack. See :mod:`bench.abuse.run` and bench/README.md ("make abuse")."""
