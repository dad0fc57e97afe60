"""Shared fixtures: unique channel/heap names, removed after each test."""
from __future__ import annotations

import os
import uuid
from typing import Iterator

import pytest

import zimp


@pytest.fixture
def name() -> Iterator[str]:
    """A fresh name; its channel and heap segments are removed afterwards."""
    n = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield n
    zimp.unlink(n, missing_ok=True)
    zimp.Heap.unlink(n, missing_ok=True)


@pytest.fixture
def chan(name: str) -> Iterator[zimp.Channel]:
    """A channel with small slots, unlinked afterwards."""
    with zimp.create(name, slots=8, slot_size=4096) as ch:
        yield ch


def shm_mappings(segment: str) -> list[tuple[int, int, int]]:
    """(start, end, file offset) of this process's mappings of /dev/shm/<segment>."""
    out = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == f"/dev/shm/{segment}":
                start, end = (int(x, 16) for x in parts[0].split("-"))
                out.append((start, end, int(parts[2], 16)))
    return out


def file_offset(segment: str, address: int) -> int:
    """The offset in the segment file that `address` maps; fails if none does."""
    for start, end, off in shm_mappings(segment):
        if start <= address < end:
            return off + address - start
    raise AssertionError(f"{address:#x} is not in a mapping of /dev/shm/{segment}")
