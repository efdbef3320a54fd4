"""The mutation score as data (``Score``, ``Report``) and as text; the JSON is ``Report.as_dict``.

Per mode: ``score`` = killed / non-equivalent mutants (killed: a failure, a timeout or a crash;
not-reached mutants count as survivors, as PIT counts "no coverage"); ``strength`` = killed /
non-equivalent mutants the run reached. Tables per module and per kind, then every survivor with its
diff — those that survive both modes, then those only lockstep kills — grouped by kind, then the
crash and timeout kills (cheap kills, listed apart) and the equivalent mutants with their reasons.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from bench.power.harness import KILLS, MutantResult
from bench.power.mutants import KINDS
from bench.power.worker import MODES

LABEL = {"lockstep": "lockstep", "invariants": "invariants only"}


@attrs.frozen
class Score:
    total: int  # non-equivalent
    reached: int
    killed: int
    crash: int
    timeout: int
    by_reason: dict[str, int]

    @property
    def score(self) -> float | None:
        return self.killed / self.total if self.total else None

    @property
    def strength(self) -> float | None:
        return self.killed / self.reached if self.reached else None

    def as_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "score": self.score, "strength": self.strength}


def score(results: Sequence[MutantResult], mode: str) -> Score:
    counted = [r for r in results if r.equivalent is None and mode in r.modes]
    killed = [r for r in counted if r.modes[mode].status in KILLS]
    return Score(
        total=len(counted),
        reached=sum(1 for r in counted if r.modes[mode].status != "not_reached"),
        killed=len(killed),
        crash=sum(1 for r in killed if r.modes[mode].status == "crash"),
        timeout=sum(1 for r in killed if r.modes[mode].status == "timeout"),
        by_reason=dict(Counter(r.modes[mode].reason or "" for r in killed
                               if r.modes[mode].status == "killed")),
    )


@attrs.frozen
class Report:
    results: tuple[MutantResult, ...]
    modes: tuple[str, ...]
    texts: dict[str, str]  # module -> pristine text (for the diffs)
    meta: dict[str, Any]  # selection, budget, times, baseline

    def scores(self, pick: Callable[[MutantResult], bool] = lambda r: True) -> dict[str, Score]:
        chosen = [r for r in self.results if pick(r)]
        return {mode: score(chosen, mode) for mode in self.modes}

    def below(self, thresholds: dict[str, float]) -> list[str]:
        """Modes whose score is under the threshold (percent)."""
        out = []
        for mode, minimum in thresholds.items():
            s = self.scores()[mode].score if mode in self.modes else None
            if s is not None and 100 * s < minimum:
                out.append(f"{LABEL[mode]} score {100 * s:.1f}% < {minimum:g}%")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "scores": {m: s.as_dict() for m, s in self.scores().items()},
            "per_module": {mod: {m: s.as_dict() for m, s in self.scores(lambda r, mod=mod: r.mutant.module == mod)
                                 .items()} for mod in self._modules()},
            "per_kind": {k: {m: s.as_dict() for m, s in self.scores(lambda r, k=k: r.mutant.kind == k).items()}
                         for k in self._kinds()},
            "mutants": [r.as_dict() for r in self.results],
        }

    def _modules(self) -> list[str]:
        return sorted({r.mutant.module for r in self.results})

    def _kinds(self) -> list[str]:
        present = {r.mutant.kind for r in self.results}
        return [k for k in KINDS if k in present]

    # text ---------------------------------------------------------------

    def render(self) -> str:
        out: list[str] = []
        meta = self.meta
        out.append("rmqspec power — the mutation score of `rmqspec conform`")
        for key in ("source", "candidate", "reference", "budget", "selection", "timing", "rescored"):
            if key in meta:
                out.append(f"{key + ':':<11} {meta[key]}")
        out.append("")
        out.append(self._overall())
        out.append("")
        out.append(self._table("per module", self._modules(), lambda r, v: r.mutant.module == v))
        out.append("")
        out.append(self._table("per kind", self._kinds(), lambda r, v: r.mutant.kind == v))
        out.append("")
        out.append("kinds: " + "; ".join(f"{k}: {d}" for k, d in KINDS.items() if k in self._kinds()))
        out.extend(self._survivors())
        out.extend(self._cheap_kills())
        out.extend(self._equivalents())
        return "\n".join(out).rstrip() + "\n"

    def _overall(self) -> str:
        lines = [f"{'':<28}" + "".join(f"{LABEL[m]:>22}" for m in self.modes)]
        scores = self.scores()

        def row(label: str, cell: Callable[[Any], str]) -> str:
            return f"{label:<28}" + "".join(f"{cell(scores[m]):>22}" for m in self.modes)

        lines.append(row("score (killed / mutants)", lambda s: _frac(s.killed, s.total)))
        lines.append(row("strength (killed / reached)", lambda s: _frac(s.killed, s.reached)))
        lines.append(row("  by an invariant", lambda s: str(s.by_reason.get("invariant", 0))))
        lines.append(row("  by a lockstep mismatch", lambda s: str(s.by_reason.get("lockstep", 0))))
        lines.append(row("  by an answer (no model)", lambda s: str(s.by_reason.get("oracle", 0))))
        lines.append(row("  candidate raised", lambda s: str(s.by_reason.get("raised", 0))))
        others = lambda s: str(sum(v for k, v in s.by_reason.items()  # noqa: E731
                                   if k not in ("invariant", "lockstep", "oracle", "raised")))
        lines.append(row("  other failure", others))
        lines.append(row("  crash (import/construct)", lambda s: str(s.crash)))
        lines.append(row("  timeout", lambda s: str(s.timeout)))
        lines.append(row("not reached (survived)", lambda s: str(s.total - s.reached)))
        eq = sum(1 for r in self.results if r.equivalent is not None)
        lines.append(f"equivalent (excluded): {eq}; mutants run or judged: {len(self.results)}")
        if set(self.modes) == {"invariants", "lockstep"}:
            via = {m: Counter(r.modes[m].via for r in self.results if r.modes[m].status in ("killed", "survived"))
                   for m in self.modes}
            lines.append(f"verdicts without a run of their own: invariants' survivals inferred from a lockstep pass "
                         f"{via['invariants'].get('inferred', 0)}, invariants' kills from replaying lockstep's "
                         f"counterexample {via['invariants'].get('replay', 0)}, lockstep kills from replaying the "
                         f"invariants' {via['lockstep'].get('replay', 0)}")
        by_profile = {m: Counter(r.modes[m].profile for r in self.results if r.modes[m].killed
                                 and r.modes[m].profile is not None) for m in self.modes}
        if any(by_profile.values()):
            lines.append("kills by version profile: " + "; ".join(
                f"{LABEL[m]} " + ", ".join(f"{p} {n}" for p, n in sorted(c.items())) for m, c in by_profile.items()))
        return "\n".join(lines)

    def _table(self, title: str, values: list[str], pick: Callable[[MutantResult, str], bool]) -> str:
        head = f"{title:<26}{'mutants':>8}{'equiv':>6}{'unreached':>10}"
        for m in self.modes:
            head += f"{LABEL[m] + ' killed':>26}"
        lines = [head]
        for v in values:
            chosen = [r for r in self.results if pick(r, v)]
            scores = {m: score(chosen, m) for m in self.modes}
            eq = sum(1 for r in chosen if r.equivalent is not None)
            first = scores[self.modes[0]]
            line = f"{v:<26}{len(chosen):>8}{eq:>6}{first.total - first.reached:>10}"
            for m in self.modes:
                line += f"{_frac(scores[m].killed, scores[m].total):>26}"
            lines.append(line)
        return "\n".join(lines)

    def _survivors(self) -> list[str]:
        out: list[str] = []
        both = [r for r in self.results if r.equivalent is None
                and all(not r.modes[m].killed for m in self.modes)]
        title = "survivors of both modes" if len(self.modes) > 1 else f"survivors ({LABEL[self.modes[0]]})"
        out.extend(self._listed(title, both))
        if len(self.modes) > 1:
            only = [r for r in self.results if r.equivalent is None and r.modes["lockstep"].killed
                    and not r.modes["invariants"].killed]
            out.extend(self._listed("survivors of the invariants only (killed in lockstep)", only))
        return out

    def _listed(self, title: str, results: list[MutantResult]) -> list[str]:
        out = ["", f"== {title}: {len(results)}"]
        for kind in KINDS:
            group = [r for r in results if r.mutant.kind == kind]
            if not group:
                continue
            out.append(f"\n-- {kind} ({len(group)})")
            for r in group:
                m = r.mutant
                note = "" if r.reached is not False else "  [not reached]"
                out.append(f"{m.id}  {m.module}:{m.line}  {m.function}{note}")
                out.extend("    " + line for line in m.diff(self.texts[m.module]).splitlines()[2:])
        return out

    def _cheap_kills(self) -> list[str]:
        out: list[str] = []
        for status, title in (("crash", "crash kills (import, construction, signal)"), ("timeout", "timeouts")):
            group = [r for r in self.results if any(r.modes[m].status == status for m in self.modes)]
            out.extend(["", f"== {title}: {len(group)}"])
            for r in group:
                mode = next(r.modes[m] for m in self.modes if r.modes[m].status == status)
                why = (mode.failure or "").splitlines()[0][:160] if mode.failure else ""
                out.append(f"{r.mutant.id}  {r.mutant.module}:{r.mutant.line}  {mode.reason or ''}  {why}".rstrip())
        return out

    def _equivalents(self) -> list[str]:
        group = [r for r in self.results if r.equivalent is not None]
        out = ["", f"== equivalent (excluded from the score): {len(group)}"]
        for r in group:
            m = r.mutant
            out.append(f"{m.id}  {m.module}:{m.line}  — {r.equivalent}")
            out.extend("    " + line for line in m.diff(self.texts[m.module]).splitlines()[2:])
        stale = self.meta.get("stale_equivalents") or []
        if stale:
            out.append(f"equivalent.toml ids not in this pool (stale, or other modules/kinds): {', '.join(stale)}")
        return out


def _frac(n: int, d: int) -> str:
    return f"{n}/{d} {100 * n / d:5.1f}%" if d else f"{n}/0     –"


__all__ = ["MODES", "Report", "Score", "score"]
