"""The committed lifecycle docs equal what the generator produces from the tables."""

from __future__ import annotations

from pathlib import Path

from rmqspec.model import diagrams
from rmqspec.model.diagrams import DRAWN
from rmqspec.model.lifecycle import LIFECYCLES, POP_LIFECYCLES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_committed_docs_equal_the_generator_output():
    for name, text in diagrams.outputs().items():
        assert (DOCS / name).read_text(encoding="utf-8") == text, (
            f"docs/{name} is stale: run python -m rmqspec.model.diagrams docs"
        )


def test_generator_writes_every_lifecycle(tmp_path):
    written = diagrams.write(tmp_path)
    assert {p.name for p in written} == {"lifecycles.md"} | {
        f"lifecycles-{lc.name}.dot" for lc in DRAWN
    }
    assert DRAWN == LIFECYCLES and all(lc in DRAWN for lc in POP_LIFECYCLES)
    text = (tmp_path / "lifecycles.md").read_text(encoding="utf-8")
    for lc in DRAWN:
        assert f"## {lc.name}" in text and lc.to_mermaid().splitlines()[1] in text


def test_cli_usage_error_exit_code(capsys):
    assert diagrams.main([]) == 2
    assert "usage" in capsys.readouterr().err
