"""A run on the manual clock is bounded: past ``RUN_CAP_FACTOR`` × max_examples, ``init`` rejects.

With fewer than 1000 max_examples Hypothesis runs one targeting pass that hill-climbs the depth scores
(``properties/composite.depth_targets``) until its own limit of 1000 calls: on a run that found nothing
that was twenty minutes of ``make test`` for one replica. The cap ends such a pass: its examples are
rejected before they build a broker, and without scores it makes no progress.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis.errors import HypothesisDeprecationWarning, UnsatisfiedAssumption

from rmqspec.model import factory as model_factory
from rmqspec.properties.conformance import conformance_machine


def test_examples_past_the_cap_are_rejected_before_they_build_a_broker() -> None:
    built: list[int] = []

    def factory(clock, config, workdir):
        built.append(1)
        return model_factory(clock, config, workdir)

    machine = conformance_machine(factory)
    machine.run_cap = 1
    machine.examples.append(1)
    m = machine()  # the second example: past the cap
    with pytest.raises(UnsatisfiedAssumption), warnings.catch_warnings():
        # a rejection outside a Hypothesis test (here: called directly) is deprecated, not wrong
        warnings.simplefilter("ignore", HypothesisDeprecationWarning)
        m.init(1, 0, 0)
    m.teardown()
    assert built == [] and machine.coverage["run_cap"] == 1

