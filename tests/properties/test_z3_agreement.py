"""The z3 twins agree with the Python lifecycle tables on concrete states.

For Hypothesis-drawn (state, vars, action, args), ``Lifecycle.step`` and
``Encoding.successor`` (concrete values substituted into the z3 relation,
all successors enumerated) must agree: same target state and variables, and
``Refused`` exactly when z3 finds no successor.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.model.lifecycle import Refused
from rmqspec.properties.z3_encode import ENCODINGS, Encoding

# Value ranges per variable/argument: small, around the interesting boundaries.
SMALL = st.integers(-3, 25)
TIME = st.integers(-5, 120)
RANGES: Mapping[str, st.SearchStrategy[int]] = {
    # message
    "r": SMALL,
    "m": st.integers(-1, 20),
    "deliver_ts": TIME,
    "max_level": st.integers(-1, 20),
    "level": SMALL,
    "delay": st.integers(-5, 60),
    # lock
    "holder": st.integers(-1, 3),
    "client": st.integers(-1, 3),
    "last_update": TIME,
    "max_live": st.integers(-2, 60),
    # transaction
    "checks": st.integers(-1, 6),
    "born": TIME,
    "check_max": st.integers(-1, 6),
    "immunity": st.integers(-5, 60),
    "reserved": st.integers(-5, 100),
    # pop
    "pop_ts": TIME,
    "inv": st.integers(-2, 60),
    "h": st.integers(-1, 4),
    "handle": st.integers(-1, 4),
    "invisible": st.integers(-2, 60),
    # orderly pop
    "off": st.integers(-1, 6),
    "n": st.integers(-1, 4),
    "att": st.integers(-1, 3),
    "attempt": st.integers(-1, 3),
    "batch": st.integers(-1, 4),
    "count": st.integers(-1, 4),
    # all
    "now": TIME,
}


def python_step(enc: Encoding, state: str, vars_: object, action: str, args: dict[str, int]):
    try:
        target, new_vars = enc.lifecycle.step(state, vars_, action, args)
    except Refused:
        return None
    return target, attrs.asdict(new_vars)


def agree(enc: Encoding, state: str, vars_: object, action: str, args: dict[str, int]) -> None:
    expected = python_step(enc, state, vars_, action, args)
    found = enc.successor(state, vars_, action, args)
    if expected is None:
        assert found == [], f"Python refuses {action} in {state} {vars_} {args}; z3 allows {found}"
    else:
        assert found == [expected], (
            f"{enc.name}: {action} in {state} {vars_} {args}: Python {expected}, z3 {found}"
        )


@pytest.mark.parametrize("name", sorted(ENCODINGS))
@given(data=st.data())
def test_python_and_z3_transitions_agree(name: str, data: st.DataObject) -> None:
    enc = ENCODINGS[name]
    state = data.draw(st.sampled_from(enc.lifecycle.states), label="state")
    vars_ = enc.vars_cls(**{x: data.draw(RANGES[x], label=x) for x in enc.var_names})
    action = data.draw(st.sampled_from(enc.actions), label="action")
    args = {x: data.draw(RANGES[x], label=x) for x in enc.args}
    agree(enc, state, vars_, action, args)


@pytest.mark.parametrize(
    ("name", "state", "vars_", "action", "args", "expected"),
    [
        # route_send_back boundary: r == m goes to the DLQ, r == m - 1 is retried at level 3 + r.
        (
            "message",
            "DELIVERED",
            {"r": 2, "m": 2},
            "send_back",
            {"level": 0, "now": 5, "delay": 7},
            ("DEAD", {"r": 3}),
        ),
        (
            "message",
            "DELIVERED",
            {"r": 1, "m": 2},
            "send_back",
            {"level": 0, "now": 5, "delay": 7},
            ("SCHEDULED", {"r": 2, "deliver_ts": 12}),
        ),
        # is_due boundary: deliver_ts == now fires.
        ("message", "SCHEDULED", {"deliver_ts": 9}, "fire", {"now": 9}, ("STORED", {})),
        ("message", "SCHEDULED", {"deliver_ts": 9}, "fire", {"now": 8}, None),
        # lock_expired boundary: exactly max_live old is still held.
        (
            "lock",
            "HELD",
            {"holder": 0, "last_update": 0, "max_live": 10},
            "lock",
            {"client": 1, "now": 10},
            ("HELD", {}),
        ),
        (
            "lock",
            "HELD",
            {"holder": 0, "last_update": 0, "max_live": 10},
            "lock",
            {"client": 1, "now": 11},
            ("HELD", {"holder": 1, "last_update": 11}),
        ),
        # check_decision: young at age < immunity, checked at age == immunity, discarded at max.
        (
            "transaction",
            "PENDING",
            {"born": 0, "immunity": 6},
            "check",
            {"now": 5},
            ("PENDING", {}),
        ),
        (
            "transaction",
            "PENDING",
            {"born": 0, "immunity": 6},
            "check",
            {"now": 6},
            ("PENDING", {"checks": 1}),
        ),
        ("transaction", "PENDING", {"checks": 15}, "check", {"now": 100_000}, ("DISCARDED", {})),
        ("transaction", "DISCARDED", {}, "commit", {"now": 1}, None),
    ],
)
def test_boundaries_agree(name, state, vars_, action, args, expected) -> None:
    enc = ENCODINGS[name]
    concrete = enc.vars_cls(**vars_)
    full_args = {x: args.get(x, 0) for x in enc.args}
    agree(enc, state, concrete, action, full_args)
    found = enc.successor(state, concrete, action, full_args)
    if expected is None:
        assert found == []
    else:
        target, changed = expected
        assert found == [(target, {**attrs.asdict(concrete), **changed})]
