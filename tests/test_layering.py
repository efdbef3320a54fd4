"""The dependency direction between the top-level folders (CONTRIBUTING.md, "Dependency direction"):
every import of ``rmqspec.<folder>`` from another folder, module-level or inside a function, is one of
the allowed edges, and the narrow edges come only from the modules named for them."""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("model", "impl", "properties", "traces", "spark", "remoting", "cli")

# folder -> the folders it may import
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "impl": {"model"},
    "remoting": {"model", "impl"},  # impl's codec: the records on the wire are the store's records
    "properties": {"model", "impl", "remoting"},
    "traces": {"model", "properties"},
    "spark": {"model", "traces", "properties"},
    "cli": {"model", "impl", "remoting", "properties", "traces", "spark"},
}
# (importer, imported) -> the importing modules allowed, and the imported modules they may use
NARROW: dict[tuple[str, str], tuple[set[str], tuple[str, ...]]] = {
    # the conformance runner: a candidate's on-disk store probed, its examples' scratch directories
    ("properties", "impl"): ({"properties/store_probe.py", "properties/conform_base.py"}, ("rmqspec.impl.",)),
    # the adapter registry: a rocketmq:// candidate
    ("properties", "remoting"): ({"properties/adapters.py"}, ("rmqspec.remoting.",)),
    # the reference checker reports the invariants' codes and runs their table-derived rules, and reads a
    # broadcasting client's runs as the invariant does (``inv_broadcast.Run``), a clean's send-back
    # (``inv_timeout.clean_timing``) and a producer's attempts (``inv_route``'s pure rules, issue 43)
    ("traces", "properties"): (set(), ("rmqspec.properties.codes", "rmqspec.properties.inv_replay",
                                       "rmqspec.properties.inv_tables", "rmqspec.properties.inv_broadcast",
                                       "rmqspec.properties.inv_timeout", "rmqspec.properties.inv_route")),
}


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
    return [m for m in out if m == "rmqspec" or m.startswith("rmqspec.")]


@functools.cache
def _edges() -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Every cross-folder import, by (importer, imported) folder; parsed once per session."""
    edges: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for module in _imports(path):
                parts = module.split(".")
                other = parts[1] if len(parts) > 1 else ""
                if other != folder:
                    edges[(folder, other)].append((rel, module))
    return edges


def test_every_import_between_folders_is_an_allowed_edge() -> None:
    bad = []
    for (a, b), uses in _edges().items():
        if b not in ALLOWED[a]:
            bad += [f"{rel} imports {module} ({a} → {b} is not allowed)" for rel, module in uses]
            continue
        if (a, b) in NARROW:
            files, prefixes = NARROW[(a, b)]
            bad += [f"{rel} imports {module} (only {sorted(files) or 'any'} may, and only {prefixes})"
                    for rel, module in uses
                    if (files and rel not in files) or not module.startswith(prefixes)]
    assert bad == []


def test_nothing_imports_the_command_line_or_the_tests() -> None:
    for (_, b), uses in _edges().items():
        assert b not in ("cli", "tests"), uses


def test_the_graph_has_no_cycle() -> None:
    graph = {a: {b for (x, b) in _edges() if x == a and b in FOLDERS} for a in FOLDERS}
    seen: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, " → ".join((*path, node))
        if node in seen:
            return
        for nxt in graph[node]:
            visit(nxt, (*path, node))
        seen.add(node)

    for folder in FOLDERS:
        visit(folder, ())
