"""Which mutants a run measures: the pool, a deterministic selection by kind, the equivalent ones.

Theory of operation
-------------------
The **pool** is every site (``mutants.find_mutants``) of the mutated modules: by default the
broker's request path, store and recovery (``DEFAULT_MODULES``), and of the copied ``model`` rule
modules only the definitions the candidate reaches (``candidate.candidate_scope``: the model's own
lifecycle tables in ``model/lifecycle.py`` are not the candidate's code). ``EXCLUDED`` says why the
rest of the candidate's closure is not mutated by default (``--modules`` can still name it), and
``OUT_OF_SCOPE`` drops the statements of mutated modules that only feed a recorder conform never
attaches (the broker's own trace, the crash-exploration effect log) or bookkeeping only those and
inspection read, ``INSPECTION`` the methods conform never calls on a candidate (tests' and the
lockstep forks' inspection), ``FAULT_INJECTION`` the store's crash simulation (a mutant of it injects
another fault; the broker recovering from it is what is judged), ``FOREIGN_INPUT`` the functions that
read only what another writer made (the candidate reads its own files), ``TRACE_ONLY_ARGS`` the
arguments whose value reaches only the trace.

The **selection** draws ``size`` mutants with ``random.Random(seed)``: a quota per kind
(``KIND_WEIGHTS``, scaled to ``size``; a kind with fewer sites gives its share to the others), and
within a kind a module's share grows with the square root of its number of sites (see ``select``). A drawn mutant whose
splice fails ``mutants.verify`` is replaced by the next draw. Same pool + seed + size → same list.

**Equivalent** mutants (``equivalent.toml``, keyed by ``Mutant.id``, each with its reason) are
listed in the report and left out of the score; they are only those shown to change no behaviour
the Broker protocol can expose, never merely survivors.
"""

from __future__ import annotations

import ast
import math
import random
import re
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from bench.power.candidate import PROJECT, SHARED, candidate_files, candidate_scope
from bench.power.mutants import KINDS, Mutant, find_mutants, node_span, verify

DEFAULT_MODULES = (
    "impl/broker.py", "impl/broker_lifecycle.py", "impl/flushing.py", "impl/broker_store.py",
    "impl/schedule_service.py", "impl/txn_service.py",
    "impl/offsets.py", "impl/locks.py", "impl/metadata.py", "impl/store.py", "impl/recovery.py",
    "impl/commitlog.py", "impl/consumequeue.py", "impl/checkpoint.py", "impl/mappedfile.py",
    "impl/codec.py", "impl/configfiles.py",
    "model/lifecycle.py", "model/sendpath.py", "model/pullfilter.py", "model/offset_moved.py",
    "model/subscriptions.py", "model/limits.py",
)
# the rest of the candidate's closure, and why it is not mutated by default
EXCLUDED = {
    "impl/__init__.py": "re-exports the factory",
    "impl/effects.py": "records durable effects only while crash exploration installs a recorder; "
                       "conform never installs one",
    "impl/broker_views.py": "read-only views beyond the Broker protocol: counts and choices for tests and "
                            "crash exploration, and rmqspec serve's wire views; in-process conform calls none "
                            "on a candidate",
    "impl/broker_events.py": "emits the broker's SPEC §8 events to its recorder; conform builds the "
                             "candidate without one (the trace it judges is the machine's)",
    "model/sql92.py": "the SQL92 filter language (its own grammar tests); select with --modules",
    "model/javahash.py": "Java's String.hashCode, a pure function with its own tests; select with --modules",
}
# statements of the mutated modules that only report to a recorder conform never attaches: a
# pattern on the statement's text (``Mutant.context``) and why
OUT_OF_SCOPE = (
    (re.compile(r"^self\.events\."), "emits the broker's SPEC §8 trace (broker_events): conform builds the "
                                       "candidate without a recorder"),
    (re.compile(r"\btap\b|\beffects\.|\b_effects\b|\blog is (not )?None\b|\blog\.(mark|add|rel)\("),
     "records durable effects for crash exploration (effects.py): off unless a recorder is installed"),
    (re.compile(r"\bself\._(records|flushed|unflushed|crash_kind)\b|^self\._(note_)?written\(|^self\.hooks\.on_store\("),
     "the broker's record and flush counts and its last crash kind: read only by its trace (events.crash / "
     "events.recover) and by INSPECTION methods conform never calls on a candidate"),
)
# methods of a mutated module that are no behaviour a candidate shows in-process conform: inspection
# conform never calls on a candidate (tests' and the lockstep forks', which are reference brokers), the
# record counting behind the trace and that inspection, and the wire server's views; and why
WIRE_VIEW = ("a view beyond the Broker protocol for rmqspec serve's wire server (remoting/): the harness runs "
             "conform in-process, where nothing calls it; serve's wire clients do (tests/remoting and the "
             "interop clients hold it)")
INSPECTION = {
    "impl/broker.py": {
        "MmapBroker._written": "counts a written record for the trace and inspection; returns its argument",
        "MmapBroker._note_written": "the check service's hook into _written",
        "MmapBroker.group_locked": WIRE_VIEW,
    },
    "impl/broker_lifecycle.py": {
        "Lifecycle.recovery_choices": "which records may survive a crash: conform asks the reference's forks",
    },
    "impl/locks.py": {"LockManager.group_locked": WIRE_VIEW},
    "impl/store.py": {"MessageStore.has_queue": WIRE_VIEW + " (MmapBroker.queue_units')"},
}
# methods of a mutated module that simulate the fault conform injects rather than decide what the broker
# does: a mutant of them injects another fault (power keeps more or fewer unflushed bytes, a torn tail
# tears elsewhere), and the broker, recovering from it, is what is judged. RocketMQ has no such code: its
# crashes come from outside (kill -9, a power loss)
FAULT_INJECTION = {
    "impl/store.py": dict.fromkeys(
        ("MessageStore.crash", "MessageStore.torn_tail"),
        "the store's crash simulation (which written bytes a kill, power loss or torn tail leaves), "
        "the fault conform injects through MmapBroker.crash, not a decision of the broker",
    ),
}
# functions of a mutated module that read only input the candidate never writes itself: (qualified-name
# prefixes, why)
FOREIGN_INPUT = {
    "impl/configfiles.py": (
        ("_Parser.", "_join_surrogates", "_has_surrogate"),
        "the fallback parser of config files another writer made (fastjson's single quotes, escapes, "
        "surrogate pairs; a torn or hand-edited file): the candidate reads only what its dump_fastjson "
        "wrote, atomically, which _parse_fast reads; tests/impl/test_configfiles.py holds it to fastjson",
    ),
}
# arguments that reach only the trace: (module, method, argument index); MmapBroker._written uses its
# ``now`` for events.store alone
TRACE_ONLY_ARGS = {"impl/broker.py": frozenset({("_written", 1), ("_note_written", 1)})}
DEFAULT_SIZE = 330
DEFAULT_SEED = 0
# relative share of each kind in a selection
KIND_WEIGHTS = {"boundary": 12, "negate": 12, "invert_cond": 8, "drop_cond": 14, "logic": 4,
                "constant": 10, "timing": 10, "unit": 4, "arith": 6, "skip_call": 12,
                "skip_assign": 8, "bool_flip": 4}
EQUIVALENT_FILE = Path(__file__).with_name("equivalent.toml")


class SelectionError(ValueError):
    """A user's choice of modules or kinds names nothing that exists."""


@attrs.frozen
class Pool:
    mutants: tuple[Mutant, ...]
    texts: dict[str, str]  # module -> pristine text

    def by_id(self) -> dict[str, Mutant]:
        return {m.id: m for m in self.mutants}


def candidate_modules() -> list[str]:
    return sorted(candidate_files())


def build_pool(modules: Sequence[str] = DEFAULT_MODULES, kinds: Iterable[str] = KINDS) -> Pool:
    files = candidate_files()
    wanted_kinds = set(kinds)
    unknown = sorted(wanted_kinds - set(KINDS))
    if unknown:
        raise SelectionError(f"unknown kind(s) {', '.join(unknown)}; kinds: {', '.join(KINDS)}")
    for module in modules:
        if module in SHARED:
            raise SelectionError(f"{module} is shared by the candidate and the reference (a value type "
                                 f"results are compared by): it is never mutated")
        if module not in files:
            raise SelectionError(f"{module} is not part of the candidate; its modules: {', '.join(sorted(files))}")
    scope = candidate_scope(files)
    out: list[Mutant] = []
    for module in sorted(set(modules)):
        ranges = scope.get(module)
        trace_only = _trace_only_spans(module, files[module])
        for m in find_mutants(module, files[module]):
            if any(a <= m.start and m.end <= b for a, b in trace_only):
                continue
            if m.kind not in wanted_kinds:
                continue
            if ranges is not None and not any(a <= m.line <= b for a, b in ranges):
                continue
            if out_of_scope(m) is not None:
                continue
            out.append(m)
    return Pool(tuple(out), {m: files[m] for m in modules})


def out_of_scope(m: Mutant) -> str | None:
    """Why a site is instrumentation rather than broker behaviour (None: it is behaviour)."""
    inspection = INSPECTION.get(m.module, {}).get(m.function)
    if inspection is not None:
        return f"not behaviour conform sees in-process: {inspection}"
    fault = FAULT_INJECTION.get(m.module, {}).get(m.function)
    if fault is not None:
        return f"fault injection, not broker behaviour: {fault}"
    prefixes, why = FOREIGN_INPUT.get(m.module, ((), ""))
    if m.function.startswith(prefixes):
        return f"reads only input from another writer: {why}"
    return next((why for pattern, why in OUT_OF_SCOPE if pattern.search(m.context)), None)


def _trace_only_spans(module: str, text: str) -> list[tuple[int, int]]:
    """The text spans of ``TRACE_ONLY_ARGS`` in one module (calls ``self.<method>(...)``)."""
    wanted = TRACE_ONLY_ARGS.get(module)
    if not wanted:
        return []
    spans = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            for method, index in wanted:
                if node.func.attr == method and len(node.args) > index:
                    spans.append(node_span(module, text, node.args[index]))
    return spans


def _quotas(available: dict[str, int], size: int) -> dict[str, int]:
    """Split ``size`` over the kinds by weight, capped at what each kind has (largest remainders
    get the units rounding leaves)."""
    quotas = dict.fromkeys(available, 0)
    left = min(size, sum(available.values()))
    while left > 0:
        open_kinds = [k for k in available if quotas[k] < available[k]]
        total = sum(KIND_WEIGHTS.get(k, 1) for k in open_kinds)
        exact = {k: left * KIND_WEIGHTS.get(k, 1) / total for k in open_kinds}
        floors = {k: min(int(exact[k]), available[k] - quotas[k]) for k in open_kinds}
        if not any(floors.values()):
            floors = {k: 1 for k in sorted(open_kinds, key=lambda k: (-exact[k], k))[:left]}
        for k, n in floors.items():
            quotas[k] += n
        left -= sum(floors.values())
    return quotas


def select(pool: Pool, size: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED) -> list[Mutant]:
    """``size`` verified mutants, a quota per kind, deterministic given ``seed``.

    Within a kind, sites are drawn without replacement with weight ``1 / sqrt(n)``, ``n`` the
    module's sites of that kind: a module's expected share grows with the square root of its size,
    so the big parsers (codec, configfiles) do not crowd out the small rule modules (locks,
    lifecycle)."""
    rng = random.Random(seed)
    counts = Counter((m.kind, m.module) for m in pool.mutants)
    by_kind: dict[str, list[tuple[float, str, Mutant]]] = defaultdict(list)
    for m in sorted(pool.mutants, key=lambda m: m.id):
        weight = 1 / math.sqrt(counts[(m.kind, m.module)])
        by_kind[m.kind].append((rng.random() ** (1 / weight), m.id, m))  # Efraimidis-Spirakis keys
    quotas = _quotas({k: len(v) for k, v in sorted(by_kind.items())}, size)
    chosen: list[Mutant] = []
    for kind in sorted(by_kind):
        taken = 0
        for _, _, m in sorted(by_kind[kind], key=lambda e: (-e[0], e[1])):
            if taken == quotas[kind]:
                break
            if verify(m, pool.texts[m.module]):
                chosen.append(m)
                taken += 1
    return sorted(chosen, key=lambda m: (m.module, m.start, m.kind, m.replacement))


@attrs.frozen
class Equivalent:
    id: str
    reason: str


def load_equivalents(path: Path = EQUIVALENT_FILE) -> dict[str, Equivalent]:
    """``[[equivalent]]`` tables with ``id`` and ``reason`` (``diff``: for readers only)."""
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out: dict[str, Equivalent] = {}
    for row in data.get("equivalent", []):
        if not row.get("reason"):
            raise SelectionError(f"{path}: {row.get('id')!r} has no reason")
        out[row["id"]] = Equivalent(row["id"], " ".join(row["reason"].split()))
    return out


def project_text(module: str) -> str:
    return (PROJECT / module).read_text(encoding="utf-8")
