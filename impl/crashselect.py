"""Which crash states to check: every one, or a seeded sample; replayable state ids.

Theory of operation
-------------------
A crash point (``crashfs``) with ``n`` dirty pages and ``m`` pending metadata
operations has, per metadata prefix, ``2^n`` subsets of persisted pages, each
with up to 7 torn variants of each other dirty page. ``select_states`` takes
them all when the workload's states fit its budget (a fixed order:
deterministic enumeration) and otherwise samples: it visits the crash points
in shuffled rounds and draws, per point, a metadata prefix (mostly all or
none), a page subset (a prefix in write order, a uniformly random subset, one
page, all but one, all or none) and, more often than not, a torn page. Draws
that leave a disk already chosen in the same window are the same state; the
later crash point's promises win. Sampling stops at the budget or when draws
keep finding nothing new.

State ids ``WORKLOAD/POINT/PREFIX/MASK/TORN``: the crash point (the effect
index it follows, ``-1`` for the empty disk), how many pending metadata
operations committed, which dirty pages persisted (bit ``i`` = the ``i``-th
dirty page in write order, hex) and the torn page (``i.k``: dirty page ``i``,
not among the persisted ones, with its first ``k`` sectors written, or ``-``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from rmqspec.impl import crashfs
from rmqspec.impl.crashfs import CrashPoint, CrashState

# -- state ids ---------------------------------------------------------------------------------------


def state_id(workload: str, state: CrashState) -> str:
    dirty = state.point.dirty_for(state.prefix)
    position = {(d.ino, d.page): i for i, d in enumerate(dirty)}
    mask = 0
    for d in state.persisted:
        mask |= 1 << position[(d.ino, d.page)]
    torn = "-" if state.torn is None else f"{position[(state.torn[0].ino, state.torn[0].page)]}.{state.torn[1]}"
    return f"{workload}/{state.point.index}/{state.prefix}/{mask:x}/{torn}"


class StateIdError(ValueError):
    """A state id that does not name a state of the recording."""


def state_by_id(points: Sequence[CrashPoint], text: str) -> CrashState:
    """The state ``WORKLOAD/POINT/PREFIX/MASK/TORN`` names (the workload part is not checked here)."""
    parts = text.rsplit("/", 4)
    if len(parts) != 5:
        raise StateIdError(f"state id {text!r}: expected WORKLOAD/POINT/PREFIX/MASK/TORN")
    _name, point_s, prefix_s, mask_s, torn_s = parts
    try:
        index, prefix, mask = int(point_s), int(prefix_s), int(mask_s, 16)
    except ValueError as exc:
        raise StateIdError(f"state id {text!r}: {exc}") from None
    point = next((p for p in points if p.index == index), None)
    if point is None:
        raise StateIdError(f"state id {text!r}: no crash point after effect #{index}")
    if not 0 <= prefix <= len(point.pending):
        raise StateIdError(f"state id {text!r}: {len(point.pending)} pending metadata operations, not {prefix}")
    dirty = point.dirty_for(prefix)
    if mask >> len(dirty):
        raise StateIdError(f"state id {text!r}: mask {mask_s} names more than the {len(dirty)} dirty pages")
    persisted = tuple(d for i, d in enumerate(dirty) if mask >> i & 1)
    torn = None
    if torn_s != "-":
        try:
            pos_s, k_s = torn_s.split(".")
            page, k = dirty[int(pos_s)], int(k_s)
        except (ValueError, IndexError):
            raise StateIdError(f"state id {text!r}: torn part {torn_s!r} is not PAGE.SECTORS") from None
        if k not in page.torn_choices() or page in persisted:
            raise StateIdError(f"state id {text!r}: page {pos_s} cannot be torn at {k} sectors here")
        torn = (page, k)
    return CrashState(point, prefix, persisted, torn)


# -- selection ---------------------------------------------------------------------------------------


def _with_torn(
    point: CrashPoint, prefix: int, dirty: tuple[crashfs.DirtyPage, ...], mask: int
) -> Iterator[CrashState]:
    chosen = tuple(d for i, d in enumerate(dirty) if mask >> i & 1)
    yield CrashState(point, prefix, chosen)
    for i, page in enumerate(dirty):
        if not mask >> i & 1:
            for k in page.torn_choices():
                yield CrashState(point, prefix, chosen, (page, k))


def all_states(point: CrashPoint) -> Iterator[CrashState]:
    """Every state of one crash point: each metadata prefix × each subset × each torn other page."""
    for prefix in range(len(point.pending), -1, -1):
        dirty = point.dirty_for(prefix)
        for mask in range(1 << len(dirty)):
            yield from _with_torn(point, prefix, dirty, mask)


def state_bound(point: CrashPoint) -> int:
    """An upper bound of ``len(list(all_states(point)))``."""
    total = 0
    for prefix in range(len(point.pending) + 1):
        n = min(len(point.dirty_for(prefix)), 40)
        total += (1 << n) * (1 + (crashfs.SECTORS - 1) * n)
    return total


def _random_state(point: CrashPoint, rng: random.Random) -> CrashState:
    n = len(point.pending)
    prefix = (n, n, 0, rng.randint(0, n))[rng.randrange(4)] if n else 0
    dirty = point.dirty_for(prefix)
    size = len(dirty)
    full = (1 << size) - 1
    shape = rng.random()
    if size == 0:
        mask = 0
    elif shape < 0.3:
        mask = (1 << rng.randint(0, size)) - 1  # a prefix of the writes, in write order
    elif shape < 0.6:
        mask = rng.getrandbits(size)
    elif shape < 0.75:
        mask = 1 << rng.randrange(size)
    elif shape < 0.9:
        mask = full ^ (1 << rng.randrange(size))
    else:
        mask = rng.choice((0, full))
    chosen = tuple(d for i, d in enumerate(dirty) if mask >> i & 1)
    if rng.random() < 0.6:
        # the page being written back when the power went: the latest one that can tear
        tearable = [(i, d) for i, d in enumerate(dirty) if not mask >> i & 1 and d.torn_choices()]
        if tearable:
            _i, page = tearable[-1] if rng.random() < 0.5 else rng.choice(tearable)
            return CrashState(point, prefix, chosen, (page, rng.choice(page.torn_choices())))
    return CrashState(point, prefix, chosen)


def select_states(points: Sequence[CrashPoint], budget: int, rng: random.Random) -> tuple[list[CrashState], bool]:
    """(states, exhaustive): every state when they fit ``budget``, else a seeded sample of ``budget``."""
    chosen: dict[tuple, CrashState] = {}
    if sum(state_bound(p) for p in points) <= 4 * budget:
        for point in reversed(points):  # the latest point of a window wins
            for state in all_states(point):
                chosen.setdefault(state.key, state)
                if len(chosen) > budget:
                    break
            if len(chosen) > budget:
                break
        else:
            return sorted(chosen.values(), key=_order), True
        chosen.clear()
    misses = 0  # draws in a row that found nothing new: the reachable states are running out
    order = list(points)
    while len(chosen) < budget and misses < max(20 * len(points), 2000):
        rng.shuffle(order)
        for point in order:
            state = _random_state(point, rng)
            old = chosen.get(state.key)
            if old is None:
                chosen[state.key] = state
                misses = 0
            else:
                misses += 1
                if old.point.index < state.point.index:
                    chosen[state.key] = state
            if len(chosen) >= budget:
                break
    return sorted(chosen.values(), key=_order), False


def _order(state: CrashState) -> tuple:
    return (state.point.index, state.prefix, [(d.ino, d.page) for d in state.persisted], state.torn is not None)
