"""SQL92 filtering: real RocketMQ 4.9.8 (``enablePropertyFilter=true``) against the model, differentially.

Hypothesis draws batches of (expressions, messages with tags and user properties) from
``properties/sql92_strategies.py`` (well- and ill-typed expressions); each batch goes to the real broker
through the wire adapter (``sql92_scenario.py``, inside the fixture's namespace) and to a ``ModelBroker``.
Per expression the two must agree on the refusal code (SUBSCRIPTION_PARSE_FAILED for an expression that
does not compile) or on the pull: status, next offset and exactly which queue offsets were delivered.
At least 200 expressions are judged, each against every message of its batch. For refused expressions
the raw PULL_MESSAGE (without CHECK_CLIENT_CONFIG) is recorded too: 4.9.8 then serves every message
(``ConsumerFilterManager.build`` returns null), see docs/fidelity.md "SQL92 filters".
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from rmqspec.model import BrokerConfig, ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.results import BrokerError
from rmqspec.properties.sql92_strategies import TAG_VALUES, expressions, property_maps
from tests.interop.realrmq import RealRocketMQ

REPO = Path(__file__).resolve().parents[2]
EXPRESSIONS_PER_BATCH = 40
MESSAGES_PER_BATCH = 20
BATCHES = 25  # 1000 expressions, each judged on 20 messages
_batch = count()


@pytest.fixture(scope="module")
def netns(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    storedir = tmp_path_factory.mktemp("rmq-sql92")
    try:
        yield realrmq.start(storedir, "enablePropertyFilter=true").netns
    finally:
        realrmq.stop(storedir)


def _real(netns: str, args: dict) -> list[dict]:
    cmd = ["ip", "netns", "exec", netns, sys.executable, "-m", "tests.interop.sql92_scenario", json.dumps(args)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"scenario failed ({done.returncode}): {done.stderr[-3000:]}"
    obs = json.loads(lines[-1])
    assert "crashed" not in obs, obs["crashed"]
    return obs["results"]


def _model(args: dict) -> list[dict]:
    b = ModelBroker(ManualClock(1_700_000_000_000), BrokerConfig(enable_property_filter=True))
    mq = MessageQueue(args["topic"], 0)
    b.create_topic(mq.topic, 1)
    for m in args["messages"]:
        b.send(Message(mq.topic, b"m", tags=m["tags"], properties=m["properties"], uniq_key=m["uniq_key"]), 0)
    out = []
    for expr in args["expressions"]:
        try:
            res = b.pull("SQL92_G", mq, 0, 32, expr, "SQL92")
            out.append({"status": res.status.name, "next": res.next_begin_offset,
                        "offsets": [m.queue_offset for m in res.messages]})
        except BrokerError as exc:
            out.append({"code": exc.code.name})
    return out


_MESSAGES = st.lists(st.tuples(st.sampled_from(TAG_VALUES), property_maps()),
                     min_size=MESSAGES_PER_BATCH, max_size=MESSAGES_PER_BATCH)
_EXPRS = st.lists(expressions(), min_size=EXPRESSIONS_PER_BATCH, max_size=EXPRESSIONS_PER_BATCH)

# Hand-picked corners of model/sql92.py's docstring, run first (explicit example).
CORNERS = [
    "TAGS = 'logistics' AND region IN ('HZ','SH')", "a = b", "a <> b", "TRUE = a", "a = TRUE", "a = FALSE",
    "a > 0.0", "a > 1e-400", "a BETWEEN 5 AND -5", "a BETWEEN 5 AND 1", "a NOT BETWEEN 1 AND 3", "a = 007",
    "a = 1 b #", "a = 1 #", "a = 1 -- c", "a = 1 -- c\n OR b = 'y'", "a = /* c */ 1", "a = 'it''s'", "a",
    "NOT a", "NOT a = 'x'", "a > b", "a = 1 OR b = 'y'", "b = 'y' OR a = 1", "a = 5", "a = 5.0", "a = 2L",
    "a = 3000000000", "a > 1.5", "- -2147483648 = -2147483648", "-a > 1", "a IN ('x', 'y', 'z', 'w', 'v')",
    "a IS NULL", "a IS NOT NULL", "(a = 'x') IS NULL", "5 IS NULL", "NULL", "TRUE", "FALSE", "a + 1 = 2",
    "a = 1)", "1 = TRUE", "'true' = TRUE", "a = 1 = FALSE", "a iS nOt NuLl", "$a = 1", "é = 'x'", "a IN (1)",
    "5 IN ('x')", "a = NULL", "a < TRUE", "(a = 1) > 1", "", "a == 1",
]
CORNER_PROPS = [
    {"a": "x", "b": "x"}, {"a": "true"}, {"a": "TRUE", "b": "y"}, {"a": "yes"}, {"a": "5"}, {"a": "+5"},
    {"a": "05"}, {"a": " 1.5 "}, {"a": "1.5f"}, {"a": "NaN"}, {"a": "Infinity"}, {"a": "0x1p1"},
    {"a": "\u0661\u0662"}, {"a": "3000000000"}, {"a": "-2147483648"}, {"a": "10", "b": "9.5"},
    {"a": "it's"}, {"b": "y"}, {"a": "abc", "b": "y"}, {"$a": "1", "a": "0"},
]


def batch_args(k: int, msgs: list, exprs: list[str]) -> dict:
    """The scenario's arguments for batch ``k``: a topic of its own, the messages with UNIQ_KEYs of their own."""
    return {"topic": f"SQL92_T{k}", "expressions": exprs, "messages": [
        {"tags": tags, "properties": props, "uniq_key": f"7F00000100002A9F{k:04X}{i:012X}"}
        for i, (tags, props) in enumerate(msgs)]}


def judge_batch(netns: str, args: dict) -> tuple[list[str], list[dict]]:
    """The batch on the broker in ``netns`` and on the model: the differences (a raw pull of an expression that does
    not compile serving less than every message, an answer unlike the model's) and the broker's answers."""
    real, model = _real(netns, args), _model(args)
    every = list(range(len(args["messages"])))
    differences = []
    for expr, r, m in zip(args["expressions"], real, model, strict=True):
        raw = r.pop("raw", None)
        r.pop("remark", None)
        if "code" in r and raw is not None and raw != every:
            # 4.9.8's (and 5.3.3's) raw pull ignores an expression that does not compile: it serves every message
            differences.append(f"{expr!r}: the raw pull without CHECK_CLIENT_CONFIG got {raw}, not every message")
        if r != m:
            differences.append(f"{expr!r}: real {r} model {m} messages {args['messages']}")
    return differences, real


def test_real_broker_and_model_filter_alike(netns: str) -> None:
    judged: list[int] = []
    differences: list[str] = []
    outcomes: dict[str, int] = {}

    @settings(max_examples=BATCHES, deadline=None, phases=[Phase.explicit, Phase.generate], database=None)
    @given(msgs=_MESSAGES, exprs=_EXPRS)
    @example(msgs=[(t, p) for t, p in zip(TAG_VALUES * 4, CORNER_PROPS, strict=False)], exprs=CORNERS)
    def batch(msgs: list, exprs: list[str]) -> None:
        found, real = judge_batch(netns, batch_args(next(_batch), msgs, exprs))
        differences.extend(found)
        for r in real:
            kind = r.get("code") or f"{r['status']} {'some' if 0 < len(r['offsets']) < len(msgs) else 'all/none'}"
            outcomes[kind] = outcomes.get(kind, 0) + 1
        judged.append(len(exprs))

    batch()
    print(f"{sum(judged)} expressions x {MESSAGES_PER_BATCH} messages; real outcomes: {outcomes}")
    assert sum(judged) >= 200
    assert outcomes.get("SUBSCRIPTION_PARSE_FAILED", 0) > 0 and outcomes.get("FOUND some", 0) > 0
    assert not differences, "\n".join(differences[:20])
