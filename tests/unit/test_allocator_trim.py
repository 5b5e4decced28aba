"""The worker's malloc settings (``allocator.tune``) keep the memory of a turn's replies for the
next turn: with only the mmap threshold fixed, glibc's trim threshold stayed at 128 KB, and every
turn of a backlog of wide routes (64 replies of 21 KB, allocated at the heap's top and freed
once written) gave the memory back and faulted it in again. Counted in page faults, which do not
depend on how busy the machine is."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from namesrv import allocator

TURNS = """
import resource
from namesrv import allocator
{tune}
def turn():
    replies = [b"r" * 21_000 + bytes([i]) for i in range(64)]
    del replies
for _ in range(50):
    turn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(500):
    turn()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 500)
"""

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
)


def _faults_per_turn(tune: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", TURNS.format(tune=tune)], capture_output=True, text=True, check=True
    )
    return float(done.stdout)


@glibc_only
def test_a_turns_replies_are_not_faulted_in_again_each_turn() -> None:
    assert _faults_per_turn("assert allocator.tune()") < 1


@glibc_only
def test_with_the_mmap_threshold_alone_they_were() -> None:
    # what tune() did before it set the trim threshold: the 1.3 MB went back every turn
    old = f"allocator._LIBC.mallopt(allocator.M_MMAP_THRESHOLD, {allocator.MMAP_THRESHOLD_BYTES})"
    assert _faults_per_turn(old) > 200
