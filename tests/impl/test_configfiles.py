"""consumerOffset.json / delayOffset.json in fastjson's dialect, atomic writes and .bak fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.impl.configfiles import (
    ConfigFileError,
    dump_fastjson,
    encode_consumer_offsets,
    load_consumer_offsets,
    load_delay_offsets,
    parse_fastjson,
    save_consumer_offsets,
    save_delay_offsets,
    split_topic_group,
)

ROCKETMQ_PRETTY = (
    '{\n\t"offsetTable":{\n\t\t"%RETRY%g1@g1":{0:0\n\t\t},\n\t\t"TopicTest@g1":{0:250,1:250,2:250,3:250\n\t\t}\n\t}\n}'
)


def test_parse_rocketmq_output() -> None:
    doc = parse_fastjson(ROCKETMQ_PRETTY)
    assert doc == {"offsetTable": {"%RETRY%g1@g1": {0: 0}, "TopicTest@g1": {0: 250, 1: 250, 2: 250, 3: 250}}}
    assert parse_fastjson('{"offsetTable":{1:5,2:0}}') == {"offsetTable": {1: 5, 2: 0}}
    assert parse_fastjson(' { "offsetTable" : { "1" : 5 } , "dataVersion":{"counter":3,"x":[1,2.5,null,true]} } ')[
        "offsetTable"
    ] == {"1": 5}
    assert parse_fastjson("{'a':'b\\u00e9'}") == {"a": "bé"}
    from rmqspec.impl.configfiles import _NO_FAST_PATH, _parse_fast

    assert _parse_fast(ROCKETMQ_PRETTY) == doc  # the common case takes the C decoder
    assert _parse_fast("{'a':1}") is _NO_FAST_PATH


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("{", 1),
        ('{"a":}', 5),
        ('{"a":1,,}', 7),
        ('{"a" 1}', 5),
        ("[1 2]", 3),
        ('{"a":1} x', 8),
        ('"abc', 0),
        ('{"a":"\\q"}', 6),
    ],
)
def test_parse_errors_name_the_offset(text: str, offset: int) -> None:
    with pytest.raises(ConfigFileError) as info:
        parse_fastjson(text)
    assert info.value.offset == offset


@given(
    st.dictionaries(
        st.text(st.characters(blacklist_categories=("Cs",)), min_size=1).map(lambda s: f"T@{s}"),
        st.dictionaries(st.integers(0, 1000), st.integers(-1, 2**62), max_size=4),
        max_size=4,
    )
)
def test_consumer_offsets_round_trip(table: dict[str, dict[int, int]]) -> None:
    from rmqspec.impl.configfiles import decode_consumer_offsets

    text = encode_consumer_offsets(table)
    assert decode_consumer_offsets(parse_fastjson(text)) == table


def test_unquoted_integer_keys_are_written() -> None:
    assert dump_fastjson({"offsetTable": {1: 5, 2: 0}}) == '{\n\t"offsetTable":{\n\t\t1:5,\n\t\t2:0\n\t}\n}'


def test_atomic_write_keeps_a_bak_and_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    save_consumer_offsets(path, {"T@g": {0: 1}})
    assert not (tmp_path / "config" / "consumerOffset.json.bak").exists()
    save_consumer_offsets(path, {"T@g": {0: 2}})
    assert load_consumer_offsets(path).table == {"T@g": {0: 2}}
    assert "0:1" in (tmp_path / "config" / "consumerOffset.json.bak").read_text()
    assert not (tmp_path / "config" / "consumerOffset.json.tmp").exists()
    path.write_text('{"offsetTable":{"T@g":{0:')  # torn main file
    loaded = load_consumer_offsets(path)
    assert loaded.table == {"T@g": {0: 1}}
    assert loaded.source == path.with_name("consumerOffset.json.bak")
    assert loaded.main_error is not None and loaded.main_error.path == str(path)
    path.with_name("consumerOffset.json.bak").write_text("nonsense")
    with pytest.raises(ConfigFileError, match=r"consumerOffset\.json\.bak"):
        load_consumer_offsets(path)
    assert split_topic_group("%RETRY%g@g") == ("%RETRY%g", "g")


def test_delay_offsets(tmp_path: Path) -> None:
    path = tmp_path / "delayOffset.json"
    assert load_delay_offsets(path).table == {} and load_delay_offsets(path).source is None
    path.write_text('{\n\t"offsetTable":{1:5,2:0\n\t}\n}')
    assert load_delay_offsets(path).table == {1: 5, 2: 0}
    save_delay_offsets(path, {3: 7, 1: 6})
    assert path.read_text() == '{\n\t"offsetTable":{\n\t\t1:6,\n\t\t3:7\n\t}\n}'
    path.write_text('{"offsetTable":{"1":"x"}}')
    loaded = load_delay_offsets(path)  # bad shape → .bak (the previous content)
    assert loaded.table == {1: 5, 2: 0} and loaded.main_error is not None


_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
)
_json_docs = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.integers(-5, 10**6), st.text(max_size=8)), inner, max_size=4),
    ),
    max_leaves=12,
)


@given(doc=_json_docs, spacing=st.sampled_from(["", " ", "\n\t", "\u00a0"]), quote=st.booleans())
def test_the_fast_path_parses_exactly_as_the_reference_parser(doc: object, spacing: str, quote: bool) -> None:
    """parse_fastjson's C-decoder path and the hand-written parser agree (value or error offset)."""
    from rmqspec.impl.configfiles import _parse_fast, _Parser

    text = dump_fastjson(doc).replace("\t", spacing)
    if quote:
        text = text.replace('"', "'")
    try:
        slow = _Parser(text).document()
    except ConfigFileError as exc:
        with pytest.raises(ConfigFileError) as info:
            parse_fastjson(text)
        assert info.value.offset == exc.offset
        return
    except UnicodeDecodeError:  # a lone surrogate escape: the fast path keeps it as such
        return
    assert parse_fastjson(text) == slow
    fast = _parse_fast(text)
    if isinstance(fast, dict | list):
        assert fast == slow
