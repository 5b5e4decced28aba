"""``make bench-scale`` (issue #27): the fleet at the sizes of RocketMQ's largest deployments.

Shapes (every size a flag, ``--scale`` shrinks them all, ``--smoke`` makes them tiny):

- **rip29**: broker groups of one master and two slaves, every group holding the same topics
  (RIP-29's 100 groups x 10k topics = 1M queue entries);
- **wide**: one broker with 100k topics, registered in batches of 800 (RocketMQ 5.x
  ``enableSplitRegistration``) with compressed bodies;
- **many**: 100 groups x 10k topics, each topic on 4 groups (250k distinct topics).

Per shape, on a fresh Redis and fleet: time to full registration, cached and uncached lookups at
80% of their measured peak (open loop), the admin listings, the CPU of one 30 s re-registration
cycle, memory, the longest Redis command, and the heal after Redis restarts empty. Peers
(``--peer``) run every shape except the parts that need our Redis. Same process layout as
``python -m bench``: Redis, the workers and the load generators are separate processes.
"""
