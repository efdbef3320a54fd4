"""A master/slave pair's rows judged (issue 43): HA_SYNC_ACK_UNREPLICATED, HA_SYNC_ACK_LOST,
HA_SLAVE_SERVED_UNSTORED, HA_SLAVE_BEYOND_REPLICATED, HA_SLAVE_NOT_PREFIX, HA_SLAVE_WROTE and the observation
HA_ASYNC_TAIL_LOST.

Theory of operation
-------------------
One detector runs ``properties/inv_replay_ha.judge_pair`` on the trace's rows in seq order: the same replay the
pair's invariants (``properties/inv_ha.py``) and the Spark audit (``spark/rules_ha.py``) run, so the three agree
by construction. What each code finds, what rows it reads and what a missing value leaves unjudged (never a
default: a row lacking what a rule reads makes the state it would have told unknown) are in that module's
docstring and in ``traces/README.md`` ("Master/slave pairs"). The rows of a pair carry ``detail.broker_id``
(0 master, 1 slave); a row without it is not a pair's row and is not judged (a ``store`` without it may be the
master's: the master's records are then unknown). A malformed value a rule reads (a ``detail.records`` that is
not a list of ``[commitlog_offset, msg_key]`` pairs, a ``detail.end`` that is not an integer) is read as
missing; the columns themselves are validated before any detector runs (``traces/validate.py``: a row with a
wrongly typed column is rejected, named by position and field).
"""

from __future__ import annotations

from collections.abc import Iterator

from rmqspec.properties.inv_replay_ha import judge_pair
from rmqspec.traces.checks_common import Finding, Trace

__all__ = ["detect_ha_pair"]


def detect_ha_pair(trace: Trace) -> Iterator[Finding]:
    """HA_SYNC_ACK_UNREPLICATED, HA_SYNC_ACK_LOST, HA_SLAVE_SERVED_UNSTORED, HA_SLAVE_BEYOND_REPLICATED,
    HA_SLAVE_NOT_PREFIX, HA_SLAVE_WROTE (violations) and HA_ASYNC_TAIL_LOST (an observation), issue 43's
    rules beside SPEC §8.1's: the pair's replay
    (``properties/inv_replay_ha.py``). seqs: the proving rows, then the offending one (a send, a delivery, a
    replicate, the slave's write, or the ``ha_link`` DISK_LOST)."""
    for f in judge_pair(trace.rows):
        yield Finding(code=f.code, seqs=f.seqs, keys=dict(f.keys), reason=f.reason)
