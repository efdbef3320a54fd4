"""The judges' shared plumbing: columns the driver knows to hold one value are not shipped to
Python (``arrow_judge.shipped``) and come back, equal to what Spark would have handed over
(``arrow_judge.judge``); which columns those are (``job._constants``); ``lexsort``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import functions as F

from rmqspec.spark import job
from rmqspec.spark.arrow_judge import CONSTANT_TYPES, constant_column, judge, keyed, lexsort, member, shipped


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        ("", pa.string()),
        ("trace-é", pa.string()),
        (None, pa.string()),
        (0, pa.int32()),
        (7, pa.int64()),
        (None, pa.int64()),
    ],
)
@pytest.mark.parametrize("n", [0, 1, 5])
def test_constant_column_equals_the_column_spark_would_hand_over(value: Any, dtype: pa.DataType, n: int) -> None:
    got = constant_column(value, dtype, n)
    assert got.type == dtype
    assert got.equals(pa.array([value] * n, dtype))


def test_judge_adds_back_the_left_out_columns_and_keeps_shipped_ones() -> None:
    seen: list[pa.Table] = []

    def fn(table: pa.Table) -> list[dict[str, Any]]:
        seen.append(table)
        return []

    batch = pa.RecordBatch.from_pylist([{"seq": 1, "epoch": 3}, {"seq": 2, "epoch": 4}])
    list(judge(fn, {"trace": "t", "drain": None, "epoch": 0})(iter([batch])))
    table = seen[0]
    assert table["trace"].to_pylist() == ["t", "t"]
    assert table["drain"].to_pylist() == [None, None] and table["drain"].type == CONSTANT_TYPES["drain"]
    assert table["epoch"].to_pylist() == [3, 4]  # shipped: never replaced


def test_shipped_leaves_out_constant_columns_and_keyed_their_key(spark: Any) -> None:
    df = spark.createDataFrame([("", 1, "a", 0), ("", 2, "b", 0)], "trace string, seq long, msg_key string, epoch int")
    rows, left_out = shipped(df, [F.col("trace"), F.col("seq"), F.col("msg_key")], {"trace": "", "epoch": 0})
    assert rows.columns == ["seq", "msg_key"]
    assert left_out == {"trace": ""}  # epoch is not among the pass's columns
    assert sorted(r["seq"] for r in keyed(rows, "trace", "msg_key").collect()) == [1, 2]


def _fact(trace: str, good: int, drain: int | None = None, bounds: tuple[int, ...] = ()) -> dict[str, Any]:
    return {"trace": trace, "good": good, "drain": drain, "bounds": list(bounds)}


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ([_fact("", 10, drain=9)], {"trace": "", "drain": 9, "epoch": 0, "crashes": 0}),
        ([_fact("", 10, bounds=(4,))], {"trace": "", "drain": None}),
        ([_fact("a", 5), _fact("b", 5)], {"epoch": 0, "crashes": 0}),
        ([_fact("a", 5, drain=3), _fact("b", 0, bounds=(2,))], {"trace": "a", "drain": 3, "epoch": 0, "crashes": 0}),
        ([_fact("a", 5), _fact("b", 5, bounds=(1,))], {}),
    ],
)
def test_constants_are_the_columns_with_one_value_on_every_valid_row(
    facts: list[dict[str, Any]], expected: dict[str, Any]
) -> None:
    assert job._constants(facts) == expected


def test_member_is_isin_over_the_names_and_null_is_never_a_member() -> None:
    names = ["a", "b", "c"]
    codes = np.array([0, 1, 2, -1, 1, 0])
    for values in ((), ("a",), ("b", "c"), ("a", "b", "c", "z"), {"c"}):
        expected = np.isin(codes, [i for i, n in enumerate(names) if n in values])
        assert member(codes, names, values).tolist() == expected.tolist()


_INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def _sort_keys(draw: Any) -> list[np.ndarray]:
    """1-5 keys of one length: small codes (packed into one int64), seqs, bools, and now and then a
    key whose range alone fills an int64 (null codes are the least int64) or floats (not packed)."""
    n = draw(st.integers(0, 40))
    keys = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["code", "code", "seq", "bool", "wide", "float"]))
        if kind == "code":
            keys.append(np.array(draw(st.lists(st.integers(-1, 6), min_size=n, max_size=n)), dtype=np.int64))
        elif kind == "seq":
            keys.append(np.array(draw(st.lists(st.integers(0, 10**9), min_size=n, max_size=n)), dtype=np.int64))
        elif kind == "bool":
            keys.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool))
        elif kind == "wide":
            keys.append(np.array(draw(st.lists(_INT64, min_size=n, max_size=n)), dtype=np.int64))
        else:
            keys.append(np.array(draw(st.lists(st.floats(-3, 3), min_size=n, max_size=n)), dtype=np.float64))
    return keys


@given(_sort_keys())
def test_lexsort_is_numpy_lexsort(keys: list[np.ndarray]) -> None:
    """The same permutation as ``numpy.lexsort`` (ties keep their order), packed or not."""
    assert lexsort(tuple(keys)).tolist() == np.lexsort(tuple(keys)).tolist()
