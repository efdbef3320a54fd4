"""The conformance machine drives oneway sends and sends whose answer is lost (issue 42), and catches
brokers that break them — in lockstep and without the model.

- ``OnewayDropped``: a oneway send is answered by nothing and stored by nothing (a broker that takes the
  oneway flag for "the client does not care"). RocketMQ's SendMessageProcessor handles a oneway request
  as any send; only its answer is never written. Lockstep sees the observer's pulls differ; without the
  model ``judge_oneway`` (``properties/oracles.py``) sees no copy.
- ``DedupsUniqKey``: a send whose UNIQ_KEY the broker already stored is answered with the stored copy's
  result and not stored again (an "idempotent" producer path RocketMQ does not have: the producer's
  retry after a lost answer is stored again, a duplicate the consumers see). Lockstep sees the answer
  differ; without the model ``judge_stored_again`` sees the retry answered at the first copy's offset.
- ``BatchAsSends``: SEND_BATCH_MESSAGE stored as one plain send per item. Lockstep sees the stored
  records differ; without the model ``judge_batch_item`` sees an item without the WAIT its client sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from rmqspec.model.broker import ModelBroker
from rmqspec.model.message import Message, batch_topic
from rmqspec.model.results import SendResult
from rmqspec.properties.runner import budget_settings, check_conformance
from tests.untraced import budget_run


class OnewayDropped(ModelBroker):
    """SEND_MESSAGE with the oneway flag is dropped."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)

    def send_oneway(self, msg: Message, queue_id: int) -> None:
        self._require_running()


class DedupsUniqKey(ModelBroker):
    """A send of a UNIQ_KEY already stored answers the first copy's result and stores nothing."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        self.answered: dict[str, SendResult] = {}

    def send(self, msg: Message, queue_id: int) -> SendResult:
        if msg.uniq_key is not None and msg.uniq_key in self.answered:
            self._require_running()
            return self.answered[msg.uniq_key]
        result = super().send(msg, queue_id)
        if msg.uniq_key is not None:
            self.answered[msg.uniq_key] = result
        return result


class BatchAsSends(ModelBroker):
    """SEND_BATCH_MESSAGE stored as one plain send per item (no one append: the plain send path's
    properties, no WAIT, and an item may land in the next file)."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)

    def send_batch(self, msgs: Sequence[Message], queue_id: int) -> SendResult:
        batch_topic(msgs)
        results = [self.send(msg, queue_id) for msg in msgs]
        return attrs.evolve(results[0], msg_id=",".join(r.msg_id for r in results),
                            uniq_key=",".join(r.uniq_key or "" for r in results))


CASES = {
    "oneway_dropped": (OnewayDropped, "never stored"),
    "dedups_uniq_key": (DedupsUniqKey, "was answered with the first copy's commitlog offset"),
    "batch_as_sends": (BatchAsSends, "a batch item keeps the properties the client encoded"),
}


@budget_run
@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "no-lockstep"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_broken_send_mode_is_caught(name: str, lockstep: bool) -> None:
    cls, needle = CASES[name]
    result = check_conformance(cls, lockstep=lockstep, settings=budget_settings(None, None, shrink=False))
    assert not result.passed, f"{name} passed conform{'' if lockstep else ' --no-lockstep'}"
    if needle is not None and not lockstep:
        assert needle in (result.failure or ""), (result.failure or "")[:2000]


@budget_run
def test_the_honest_model_passes_with_the_send_modes_drawn() -> None:
    result = check_conformance(_honest, lockstep=False, settings=budget_settings(None, None, shrink=False))
    assert result.passed, (result.failure or "")[:2000]
    # a oneway send drawn: by the produce rule, or as a ladder's oneway family (which draw the ci budget's programs
    # make depends on every literal of the code: properties/constant_pool.py)
    assert result.coverage.get("send_oneway", 0) + result.coverage.get("family:oneway", 0) > 0
    assert result.coverage["send_unanswered"] > 0
    assert result.coverage["send_batch:atomic"] > 0


def _honest(clock: Any, config: Any, workdir: Any = None) -> ModelBroker:
    return ModelBroker(clock, config)
