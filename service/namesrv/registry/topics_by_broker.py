"""Which cached topics show a broker name: what a broker's change must invalidate.

Kept per group of routes that show the same broker names, not per name: the topics of one cluster
mostly show the same brokers, so one set of topics serves every name of the group. Kept per name,
the RIP-29 shape (10,000 topics, each on the same 100 broker names) made 100 sets of 10,000
topics, about 50 MB in every worker whose cache held them all; grouped, it is one set.
"""

from __future__ import annotations

from collections.abc import Set

Names = frozenset[str]


class TopicsByBroker:
    def __init__(self) -> None:
        self._topics: dict[Names, set[str]] = {}  # the names some routes show -> those routes' topics
        self._groups: dict[str, set[Names]] = {}  # broker name -> the groups of names holding it

    def add(self, topic: str, names: Set[str]) -> None:
        """``topic``'s route shows ``names`` (the same names must come back to :meth:`discard`)."""
        key = frozenset(names)
        topics = self._topics.get(key)
        if topics is None:
            topics = self._topics[key] = set()
            for name in key:
                self._groups.setdefault(name, set()).add(key)
        topics.add(topic)

    def discard(self, topic: str, names: Set[str]) -> None:
        key = frozenset(names)
        topics = self._topics.get(key)
        if topics is None:
            return
        topics.discard(topic)
        if topics:
            return
        del self._topics[key]
        for name in key:
            groups = self._groups.get(name)
            if groups is not None:
                groups.discard(key)
                if not groups:
                    del self._groups[name]

    def topics_of(self, name: str) -> list[str]:
        """Every topic whose route shows ``name`` (a copy: the caller may discard them meanwhile)."""
        return [topic for key in self._groups.get(name, ()) for topic in self._topics[key]]

    def clear(self) -> None:
        self._topics.clear()
        self._groups.clear()

    def __len__(self) -> int:
        """How many broker names some cached route shows."""
        return len(self._groups)
