"""Invariants of a master/slave pair (issue 43), judged over the pair's trace rows alone.

Theory of operation
-------------------
The rows come from ``model/ha_pair.py`` (or any pair writing the same columns, docs/trace-schema.md): every row
of a pair names its broker in ``detail.broker_id`` (0 master, 1 slave); the master's ``store`` rows say what it
stored where; ``replicate`` rows say what reached the slave (``commitlog_offset`` its new end,
``detail.records`` the [offset, msg_key] pairs); the master's ``send`` rows carry ``detail.role`` and
``detail.end`` (the record's end); ``ha_link`` DISK_LOST marks the master's disk lost. One pass keeps the
slave's end and the master's stored copies per epoch (a disk loss starts a new epoch of the master's log).

Each predicate below is named after its anomaly and gives a code:

- ``SyncAckUnreplicatedProperty`` (HA_SYNC_ACK_UNREPLICATED): a SEND_OK answered by a SYNC_MASTER for a waiting
  message whose end is past the slave's end at the answer (CommitLog.submitReplicaRequest: the answer waits for
  push2SlaveMaxOffset ≥ the message's end).
- ``SyncAckLostProperty`` (HA_SYNC_ACK_LOST): at a master disk loss, a SYNC_MASTER SEND_OK the slave does not hold.
- ``SlaveServedUnstoredProperty`` (HA_SLAVE_SERVED_UNSTORED): the slave delivered a copy that neither reached it
  from the master (a replicate row) nor is the master's at that commitlog offset (msg_keys compared).
- ``SlaveBeyondReplicatedProperty`` (HA_SLAVE_BEYOND_REPLICATED): the slave delivered a copy at or past its
  replicated end.
- ``SlaveNotPrefixProperty`` (HA_SLAVE_NOT_PREFIX): a replicate row moves a record that is not the master's
  record at that offset, or does not continue where the slave's log ended.
- ``SlaveWroteProperty`` (HA_SLAVE_WROTE): the slave stored a copy or acknowledged a send (a ``store`` or a
  ``send`` row of broker 1): DefaultMessageStore.checkStoreStatus refuses every put on a SLAVE.
- ``AsyncLossObservation`` (HA_ASYNC_TAIL_LOST, an observation, never a violation): at a disk loss of an
  ASYNC_MASTER, the acknowledged messages lost are exactly the unreplicated tail (reported with that cause).

The replay is ``properties/inv_replay_ha.judge_pair``, the one the reference checker
(``traces/checks_ha.py``) and the Spark audit (``spark/rules_ha.py``) run too; what a missing value leaves
unjudged is in its docstring (a missing value never makes a finding, SPEC §8). A pair's trace starts with the
pair (the slave's end is 0 then).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rmqspec.model.events import TraceEvent
from rmqspec.properties.codes import Code, ObservationCode
from rmqspec.properties.history import History
from rmqspec.properties.inv_base import Invariant, Violation
from rmqspec.properties.inv_replay_ha import HA_OBSERVATION_CODES, HA_VIOLATION_CODES, HaFinding, judge_pair

INVARIANT_CODES: tuple[str, ...] = HA_VIOLATION_CODES
OBSERVATION_CODES: tuple[str, ...] = HA_OBSERVATION_CODES


def _v(f: HaFinding, step_of: Sequence[int] | None) -> Violation:
    seq = f.seqs[-1]
    step = step_of[seq] if step_of is not None and 0 <= seq < len(step_of) else seq
    return Violation(code=f.code, step=step, reason=f.reason, expected=f.expected, actual=f.actual, seq=seq)


def check_pair(events: Iterable[TraceEvent], step_of: Sequence[int] | None = None) -> list[Violation]:
    """Every HA invariant over ``events`` (violations only; ``observations`` lists the observations)."""
    return [_v(f, step_of) for f in judge_pair(e.as_row() for e in events) if not f.observation]


def observations(events: Iterable[TraceEvent], step_of: Sequence[int] | None = None) -> list[Violation]:
    """HA_ASYNC_TAIL_LOST findings: what a disk loss took, with its cause."""
    return [_v(f, step_of) for f in judge_pair(e.as_row() for e in events) if f.observation]


def _only(code: str) -> Any:
    def check(h: History) -> list[Violation]:
        return [v for v in check_pair(h.events, h.step_of) if v.code == code]
    return check


def _observed(h: History) -> list[Violation]:
    return observations(h.events, h.step_of)


_SRC = "S/CommitLog.submitReplicaRequest, S/ha/HAService, S/DefaultMessageStore.checkStoreStatus (4.9.8)"
# the named invariants, for tools that list invariants over a History (not in invariants.py's set: a pair's rows
# come from model/ha_pair.py, not from the single-broker conformance machine)
HA_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("SyncAckUnreplicatedProperty", Code.HA_SYNC_ACK_UNREPLICATED, "always",
              "a SYNC_MASTER SEND_OK is on the slave when answered", _SRC, _only(Code.HA_SYNC_ACK_UNREPLICATED)),
    Invariant("SyncAckLostProperty", Code.HA_SYNC_ACK_LOST, "always",
              "a SYNC_MASTER SEND_OK survives the master's disk loss", _SRC, _only(Code.HA_SYNC_ACK_LOST)),
    Invariant("SlaveServedUnstoredProperty", Code.HA_SLAVE_SERVED_UNSTORED, "always",
              "the slave serves only what the master stored", _SRC, _only(Code.HA_SLAVE_SERVED_UNSTORED)),
    Invariant("SlaveBeyondReplicatedProperty", Code.HA_SLAVE_BEYOND_REPLICATED, "always",
              "the slave serves nothing past its replicated end", _SRC, _only(Code.HA_SLAVE_BEYOND_REPLICATED)),
    Invariant("SlaveNotPrefixProperty", Code.HA_SLAVE_NOT_PREFIX, "always",
              "the slave's log is a prefix of the master's", _SRC, _only(Code.HA_SLAVE_NOT_PREFIX)),
    Invariant("SlaveWroteProperty", Code.HA_SLAVE_WROTE, "always",
              "the slave refuses writes", _SRC, _only(Code.HA_SLAVE_WROTE)),
    Invariant("AsyncLossObservation", ObservationCode.HA_ASYNC_TAIL_LOST, "observation",
              "an ASYNC_MASTER's disk loss takes exactly the unreplicated tail", _SRC, _observed),
)
