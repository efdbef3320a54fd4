"""The docs check: the documentation names only commands, options and files that exist.

Scope (``DOCS``): ``README.md``, ``CONTRIBUTING.md``, ``docs/**/*.md``, every top-level folder's
``README.md`` and ``model/CLIENT.md``. Two checks:

- **Commands.** Every ``rmqspec …`` / ``.venv/bin/rmqspec …`` / ``python -m rmqspec.cli …`` command
  line — a line of a fenced code block, or an inline code span — names a real sub-command (and
  sub-sub-command: ``store verify``, ``trace gen``) and only options that sub-command's argparse parser
  defines; an option with ``choices`` given a literal value (``--budget quick``, ``--plan
  reference|small``) must be given one of them. The parser is the one the CLI builds
  (``rmqspec.cli.main.build_parser``), introspected, never run. Words in CAPITALS and placeholders are
  not judged as values.
- **Paths.** Every relative Markdown link resolves to an existing file (and its ``#anchor`` to a heading
  of a Markdown target), and every inline code span that names a repository path (its first component
  is a top-level folder of the repository, or ``../shared/``) exists: a glob must match, and
  ``folder/module.name`` may name a name inside ``folder/module.py``. RocketMQ's own Java sources
  (``remoting/netty/NettyRemotingAbstract.…``: a CamelCase class) are not repository paths.

Renaming an option, a sub-command or a file without updating the docs fails here.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmqspec.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
REPO_DIRS = {"model", "impl", "properties", "traces", "spark", "remoting", "cli", "interop", "tests", "bench",
             "examples", "docs", "scripts", ".ci"}
DOCS = sorted({ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "model" / "CLIENT.md",
               *(ROOT / "docs").rglob("*.md"), *(p for d in REPO_DIRS if (p := ROOT / d / "README.md").exists())})
SEPARATORS = {";", "&&", "||", "|", "&", ">", ">>", "2>", "<"}
_FENCE = re.compile(r"^\s*(```|~~~)")
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
_VALUE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_WORD = re.compile(r"^[a-z][a-z-]*$")


def _rel(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def _fragments(doc: Path) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, in a fenced block) for every fenced-code line (continuations joined) and
    every inline code span of ``doc``."""
    fenced = False
    pending: list[str] = []
    start = 0
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            if not pending:
                start = number
            if line.rstrip().endswith("\\"):
                pending.append(line.rstrip()[:-1])
                continue
            pending.append(line)
            yield start, " ".join(pending), True
            pending = []
        else:
            for span in _SPAN.findall(line):
                yield number, span, False


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:  # an unbalanced quote in prose: plain words are enough
        return text.split()


def _command_starts(tokens: list[str]) -> Iterator[int]:
    for i, token in enumerate(tokens):
        if token == "rmqspec" or token.endswith("/rmqspec"):
            yield i + 1
        elif token == "-m" and i + 1 < len(tokens) and tokens[i + 1] == "rmqspec.cli":
            yield i + 2


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _strip(token: str) -> str:
    return token.strip("[](),").rstrip(".…")


def _check_command(parser: argparse.ArgumentParser, args: list[str]) -> list[str]:
    """What is wrong with one command line (``args`` after ``rmqspec``); [] when nothing is."""
    words: list[str] = []
    for token in args:
        if token in SEPARATORS or token.startswith(("$(", "2>")):
            break
        if token.endswith(";"):
            words.append(token[:-1])
            break
        words.append(token)
    errors: list[str] = []
    name = "rmqspec"
    i = 0
    while (choices := _subparsers(parser)) and i < len(words) and not words[i].startswith("-"):
        alternatives = [_strip(w) for w in words[i].split("|")]
        if not all(_WORD.match(a) for a in alternatives):
            return errors if name != "rmqspec" else []  # output or prose (`rmqspec check:`), not a command
        unknown = [a for a in alternatives if a not in choices]
        if unknown:
            return [f"{name}: no sub-command {', '.join(unknown)} (has {', '.join(sorted(choices))})"]
        name = f"{name} {alternatives[0]}"
        parser = choices[alternatives[0]]
        i += 1
    if name == "rmqspec":
        return []  # `rmqspec` alone, or followed by no command word
    options = parser._option_string_actions
    while i < len(words):
        word = _strip(words[i])
        i += 1
        if word == "--":
            break
        if not re.match(r"^--?[a-zA-Z]", word):
            continue
        option = word.split("=", 1)[0]
        action = options.get(option)
        if action is None:
            errors.append(f"{name}: no option {option}")
            continue
        if action.choices is None or action.nargs == 0:
            continue
        value = word.split("=", 1)[1] if "=" in word else (words[i] if i < len(words) else "")
        alternatives = [_strip(v) for v in value.split("|")]
        if all(_VALUE.match(v) for v in alternatives):
            bad = [v for v in alternatives if v not in action.choices]
            if bad:
                errors.append(f"{name}: {option} has no choice {', '.join(bad)} "
                              f"(has {', '.join(map(str, action.choices))})")
    return errors


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


def _command_errors(parser: argparse.ArgumentParser, doc: Path) -> tuple[list[str], int]:
    errors: list[str] = []
    seen = 0
    for number, text, _fenced in _fragments(doc):
        tokens = _tokens(text)
        for start in _command_starts(tokens):
            seen += 1
            errors += [f"{_rel(doc)}:{number}: {e}  [{text.strip()}]" for e in _check_command(parser, tokens[start:])]
    return errors, seen


def test_documented_commands_and_options_exist(parser: argparse.ArgumentParser) -> None:
    errors: list[str] = []
    seen = 0
    for doc in DOCS:
        found, count = _command_errors(parser, doc)
        errors += found
        seen += count
    assert seen > 50, f"only {seen} command lines found: is the extraction broken?"
    assert not errors, "\n".join(errors)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    anchors: set[str] = set()
    fenced = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6}\s+(.*)$", line)):
            anchors.add(_slug(m.group(1)))
    return anchors


def _link_errors(doc: Path) -> list[str]:
    errors = []
    fenced = False
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        for target in _LINK.findall(_SPAN.sub("", line)):
            if re.match(r"^[a-z][a-z+.-]*:", target):
                continue  # http:, https:, mailto:
            path_part, _, anchor = target.partition("#")
            path = (doc.parent / path_part).resolve() if path_part else doc
            if not path.exists():
                errors.append(f"{_rel(doc)}:{number}: link to a missing file {target}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                errors.append(f"{_rel(doc)}:{number}: link to a missing heading {target}")
    return errors


def _names_repo_path(span: str) -> bool:
    if " " in span or "/" not in span or re.search(r"[{}<>$…:]|NNN", span):
        return False
    if re.search(r"/[A-Z][a-z]+[A-Z]\w*(\.|$)", span):
        return False  # a RocketMQ Java source (remoting/netty/NettyRemotingAbstract.processRequestCommand)
    first = span.split("/", 1)[0]
    # ../shared/ (SPEC.md, STYLE.md) sits beside the repository in the project's checkout, not in a clone
    return first in REPO_DIRS or (span.startswith("../shared/") and (ROOT.parent / "shared").is_dir())


def _resolves(span: str, doc: Path) -> bool:
    for base in (ROOT, doc.parent):
        if "*" in span or "?" in span:
            if any(base.glob(span)):
                return True
            continue
        path = base / span
        if path.exists():
            return True
        head, _, tail = span.rpartition("/")
        stem = tail.split(".", 1)[0]
        if "." in tail and (base / head / f"{stem}.py").exists():  # folder/module.name
            return True
    return False


def _path_errors(doc: Path) -> list[str]:
    errors = []
    for number, span, fenced in _fragments(doc):
        if fenced or not _names_repo_path(span):
            continue
        if not _resolves(span, doc):
            errors.append(f"{_rel(doc)}:{number}: no such path {span}")
    return errors


def test_documented_links_and_paths_exist() -> None:
    errors: list[str] = []
    for doc in DOCS:
        errors += _link_errors(doc) + _path_errors(doc)
    assert not errors, "\n".join(errors)


def test_the_check_catches_a_renamed_option(parser: argparse.ArgumentParser) -> None:
    """The checker itself: a wrong option, sub-command or choice is reported; right ones are not."""
    cases = {
        "rmqspec conform --broker rmqspec.impl:factory --examples 20": 0,
        "rmqspec conform --broker x:f --example 20": 1,
        "rmqspec stor verify DIR": 1,
        "rmqspec store verify DIR --delay-levels '1s 2s'": 0,
        "rmqspec store verify DIR --topic T": 1,
        "rmqspec audit T --out D --plan reference|small": 0,
        "rmqspec audit T --out D --plan fast": 1,
        "rmqspec check --budget QUICK --profile rocketmq-4.9": 0,
        "rmqspec check --profile rocketmq-4.8": 1,
        "python -m rmqspec.cli trace gen --out x --inject all": 0,
        "rmqspec check: PASS (exit code 0)": 0,
    }
    for text, expected in cases.items():
        tokens = _tokens(text)
        found = [e for start in _command_starts(tokens) for e in _check_command(parser, tokens[start:])]
        assert len(found) == expected, (text, found)
