"""What the tests and the bench share to run processes: free ports, a private redis-server, child
processes with their output in a log file, a quiet garbage collector.

A package of its own, so that neither ``tests/`` nor ``bench/`` imports the other; it depends on
the service only for the redis-server command line and the die-with-parent hook, never on pytest.
"""
