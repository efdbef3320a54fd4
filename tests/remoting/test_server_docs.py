"""remoting/README.md's table of what the server answers lists exactly the codes the handler tables serve."""

from __future__ import annotations

import re
from pathlib import Path

from rmqspec.remoting.codes import RequestCode
from rmqspec.remoting.server import BROKER_HANDLERS, NAMESRV_HANDLERS

README = Path(__file__).resolve().parents[2] / "remoting" / "README.md"


def test_readme_table_matches_the_handler_tables() -> None:
    text = README.read_text()
    table = text[text.index("What the server answers"):]
    documented: dict[int, str] = {}
    for line in table.splitlines():
        if not line.startswith("| ") or line.startswith("| code"):
            continue
        cell, port = line.split("|")[1].strip(), line.split("|")[2].strip()
        for code in re.findall(r"(?<!\w)\d+(?!\w)", cell):
            documented[int(code)] = port
    served = {int(c): "broker" for c in BROKER_HANDLERS} | {int(c): "name server" for c in NAMESRV_HANDLERS}
    pushed = {RequestCode.CHECK_TRANSACTION_STATE: "server → client",
              RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: "server → client"}
    assert documented == served | {int(c): p for c, p in pushed.items()}
