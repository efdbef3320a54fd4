"""What the in-process judge tests share: drawn rows, a judge run on rows, the checker's findings of some codes."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from rmqspec.properties.codes import AuditParams
from rmqspec.spark.arrow_judge import FINDINGS_ARROW, judge
from rmqspec.traces.checker import check_trace, validate
from rmqspec.traces.checker_cases import PARAMS
from rmqspec.traces.checks_common import Finding


def judged_rows(
    fn: Callable[[pa.Table], list[dict[str, Any]]],
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    strings: Collection[str],
) -> list[dict[str, Any]]:
    """The findings of the judge ``fn`` on ``rows`` handed over as ``mapInArrow`` would (one batch;
    ``strings`` are the string columns, the others int64)."""
    schema = pa.schema([(c, pa.string() if c in strings else pa.int64()) for c in columns])
    out = list(judge(fn)(iter([pa.RecordBatch.from_pylist(list(rows), schema=schema)])))
    assert all(b.schema == FINDINGS_ARROW for b in out)
    return [f for b in out for f in b.to_pylist()]


def checked_rows(rows: Sequence[dict[str, Any]], codes: Collection[str], params: AuditParams = PARAMS) -> list[Finding]:
    """The reference checker's findings of ``codes`` in ``rows`` (which must all be valid)."""
    good, rejected = validate(list(rows))
    assert not rejected
    _, findings = check_trace(good, params)
    return [f for f in findings if f.code in codes]


def drawn_rows(
    draw: Any,
    *,
    events: Sequence[str],
    gaps: Sequence[int],
    statuses: Mapping[str, Sequence[str | None]],
    fields: Mapping[str, Sequence[Any]],
    most: int,
) -> list[dict[str, Any]]:
    """1..``most`` rows for a Hypothesis ``composite``: each an event of ``events`` after a ts gap of
    ``gaps``, a status of its event's ``statuses`` (else null) and a value of each of ``fields``."""
    rows: list[dict[str, Any]] = []
    ts = 0
    for seq in range(draw(st.integers(1, most))):
        event = draw(st.sampled_from(events))
        ts += draw(st.sampled_from(gaps))
        row = {"seq": seq, "ts": ts, "event": event, "status": draw(st.sampled_from(statuses.get(event, (None,))))}
        row.update({name: draw(st.sampled_from(values)) for name, values in fields.items()})
        rows.append(row)
    return rows
