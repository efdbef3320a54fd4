"""The tiny trace notation: parse, defaults, aliases, errors, round trip."""

from __future__ import annotations

import pytest

from rmqspec.traces.notation import NotationError, parse, render


def test_parse_defaults_and_aliases():
    rows = parse(
        """
        # a comment
        5 send t=1000 topic=T q=0 key=K1 st=SEND_OK
          store topic=T q=0 off=0 key=K1 trace_id=a   # seq 6, ts 1000
        deliver t=1002 g=G rt=- c=C1
        """
    )
    assert [r["seq"] for r in rows] == [5, 6, 7]
    assert [r["ts"] for r in rows] == [1000, 1000, 1002]
    assert rows[0]["msg_key"] == "K1" and rows[0]["queue_id"] == 0 and rows[0]["status"] == "SEND_OK"
    assert rows[1]["queue_offset"] == 0 and rows[1]["trace_id"] == "a"
    assert rows[2]["reconsume_times"] is None and rows[2]["client_id"] == "C1"
    assert rows[2]["group"] == "G" and rows[2]["topic"] is None


def test_round_trip():
    rows = parse("0 send t=1 topic=T key=K\n1 lock t=2 g=G topic=T q=3 c=C st=GRANTED\n")
    assert parse(render(rows)) == rows
    assert render(rows).splitlines()[1] == "1 lock t=2 g=G topic=T q=3 st=GRANTED c=C"


@pytest.mark.parametrize(
    "text, reason",
    [
        ("0 teleport t=1", "unknown event 'teleport'"),
        ("0 send t=soon", "ts='soon' is not an integer"),
        ("0 send topic", "'topic' is not name=value"),
        ("0", "no event name"),
        ("0 send t=-", "ts must not be null"),
        ("0 send seq=3", "seq is positional"),
    ],
)
def test_errors_name_the_line(text, reason):
    with pytest.raises(NotationError) as err:
        parse("0 send t=0\n" + text)
    assert err.value.line_no == 2 and reason in str(err.value)
