"""Key names of one registry namespace. ``lua/README.md`` documents each key's type and meaning.

Every key starts with the hash tag ``{<namespace>}``, so all of a registry lives in one Redis
Cluster slot and every script is single-slot. The registry is small (soft state that brokers
resend every 30 s), so one slot is an accepted trade-off for atomic multi-key scripts.

A broker's liveness identity is ``<cluster>/<brokerAddr>`` (RocketMQ's ``BrokerAddrInfo``): the
address never contains ``/`` (we reject such addresses), so splitting at the last ``/`` is exact.
"""

from __future__ import annotations

from dataclasses import dataclass


def live_member(cluster: str, addr: str) -> str:
    return f"{cluster}/{addr}"


def split_member(member: str) -> tuple[str, str]:
    cluster, _, addr = member.rpartition("/")
    return cluster, addr


@dataclass(frozen=True)
class Keyspace:
    namespace: str

    @property
    def prefix(self) -> str:
        return "{" + self.namespace + "}:"

    def _k(self, suffix: str) -> str:
        return self.prefix + suffix

    # --- fixed keys ---
    @property
    def clusters(self) -> str:
        return self._k("clusters")

    @property
    def brokers(self) -> str:
        return self._k("brokers")

    @property
    def live(self) -> str:
        return self._k("live")

    @property
    def deadlines(self) -> str:
        return self._k("deadlines")

    @property
    def dataversions(self) -> str:
        return self._k("dataversions")

    @property
    def filters(self) -> str:
        return self._k("filters")

    @property
    def topics(self) -> str:
        return self._k("topics")

    @property
    def topicflags(self) -> str:
        return self._k("topicflags")

    @property
    def bdigest(self) -> str:
        return self._k("bdigest")

    @property
    def bsync(self) -> str:
        return self._k("bsync")

    @property
    def pending(self) -> str:
        return self._k("pending")

    @property
    def pendingclean(self) -> str:
        return self._k("pendingclean")

    @property
    def kvns(self) -> str:
        return self._k("kvns")

    @property
    def kvbytes(self) -> str:
        return self._k("kvbytes")

    @property
    def config(self) -> str:
        return self._k("config")

    @property
    def epoch(self) -> str:
        return self._k("epoch")

    @property
    def routever(self) -> str:
        return self._k("routever")

    @property
    def events(self) -> str:
        return self._k("events")

    @property
    def meta(self) -> str:
        return self._k("meta")

    @property
    def workers(self) -> str:
        return self._k("workers")

    # --- keys named after data (always named by the caller, never built inside Lua) ---
    def alive(self, cluster: str, addr: str) -> str:
        return self._k("alive:" + live_member(cluster, addr))

    def holders(self, cluster: str, addr: str) -> str:
        return self._k("holders:" + live_member(cluster, addr))

    def topic(self, topic: str) -> str:
        return self._k("topic:" + topic)

    def mapping(self, topic: str) -> str:
        return self._k("mapping:" + topic)

    def btopics(self, broker_name: str) -> str:
        return self._k("btopics:" + broker_name)

    def kv(self, namespace: str) -> str:
        return self._k("kv:" + namespace)

    def strip(self, key: str, kind: str) -> str:
        """The name inside a data-named key: ``strip('{ns}:topic:T', 'topic') == 'T'``."""
        head = self._k(kind + ":")
        if not key.startswith(head):
            raise ValueError(f"{key!r} is not a {kind} key of namespace {self.namespace!r}")
        return key[len(head) :]
