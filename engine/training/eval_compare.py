"""Paired comparison of two ``agentflow eval`` reports of the same cases.

Two runs over the same held-out cases (same ``n``, ``seed`` and ``split``) can be
compared case by case: for each metric, how many cases the new run gets right
that the old one got wrong (*fixed*) and the other way round (*broken*). The
exact McNemar test on those discordant pairs says whether the difference is
more than chance. A single headline rate hides this: a change that fixes 47
cases and breaks 36 moves the rate by 4 points and means little.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Per-case metrics that can be compared, and which cases score each (as ``summarize``
#: counts them: calls for the call metrics, the rest for final answers; the answer
#: metrics where the case has a value).
METRICS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "tool_choice": lambda c: bool(c["expects_calls"]),
    "exact_args": lambda c: bool(c["expects_calls"]),
    "valid_json": lambda c: True,
    "final_choice": lambda c: not c["expects_calls"],
    "grounded_final": lambda c: c.get("grounded_final") is not None,
    "faithful_final": lambda c: c.get("faithful_final") is not None,
}
#: Settings that must agree for two reports to describe the same cases.
SAME_CASES = ("n", "seed", "split", "min_prompt_tokens")
#: What a report written before a setting existed used.
_BEFORE = {"split": "heldout", "min_prompt_tokens": 0}


@dataclass(frozen=True)
class PairedCount:
    """One metric of one mode, compared case by case."""

    #: Cases both reports score on this metric.
    cases: int
    #: Right in the new report, wrong in the old.
    fixed: int
    #: Wrong in the new report, right in the old.
    broken: int

    @property
    def p_value(self) -> float:
        """Two-sided exact McNemar test: the chance of a split at least this uneven."""
        n = self.fixed + self.broken
        if n == 0:
            return 1.0
        tail = sum(math.comb(n, i) for i in range(min(self.fixed, self.broken) + 1))
        return min(1.0, 2.0 * tail / 2**n)


def check_same_cases(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Raise ``ValueError`` unless two reports' settings describe the same cases."""
    for key in SAME_CASES:
        a = old.get(key, _BEFORE.get(key))
        b = new.get(key, _BEFORE.get(key))
        if a != b:
            raise ValueError(f"not the same cases: {key} is {a!r} there and {b!r} here")


def compare_reports(old: dict[str, Any], new: dict[str, Any]) -> dict[str, dict[str, PairedCount]]:
    """Per mode (present in both) and metric, the paired counts of ``new`` against ``old``.

    Both are report dicts as ``agentflow eval --json`` writes them. Raises
    ``ValueError`` when they are not runs over the same cases.
    """
    check_same_cases(old.get("settings", {}), new.get("settings", {}))
    out: dict[str, dict[str, PairedCount]] = {}
    for mode in _modes(old) & _modes(new):
        before = [c for c in old["cases"] if c["mode"] == mode]
        after = [c for c in new["cases"] if c["mode"] == mode]
        if len(before) != len(after) or any(
            (x["domain"], x["kind"], x["expects_calls"])
            != (y["domain"], y["kind"], y["expects_calls"])
            for x, y in zip(before, after, strict=True)
        ):
            raise ValueError(f"the reports' {mode} cases differ (not the same held-out set)")
        out[mode] = {}
        for metric, scored in METRICS.items():
            pairs = [
                (bool(x[metric]), bool(y[metric]))
                for x, y in zip(before, after, strict=True)
                if scored(x) and scored(y)
            ]
            out[mode][metric] = PairedCount(
                cases=len(pairs),
                fixed=sum(1 for x, y in pairs if y and not x),
                broken=sum(1 for x, y in pairs if x and not y),
            )
    return out


def _modes(report: dict[str, Any]) -> set[str]:
    return {c["mode"] for c in report.get("cases", [])}


def format_comparison(comparison: dict[str, dict[str, PairedCount]]) -> str:
    """A plain-text table: mode, metric, cases, fixed, broken, p."""
    head = f"{'mode':<10} {'metric':<15} {'cases':>6} {'fixed':>6} {'broken':>7} {'p':>7}"
    lines = [head, "-" * len(head)]
    for mode, metrics in comparison.items():
        for metric, c in metrics.items():
            if c.cases:
                lines.append(
                    f"{mode:<10} {metric:<15} {c.cases:>6} {c.fixed:>6} {c.broken:>7} "
                    f"{c.p_value:>7.3f}"
                )
    return "\n".join(lines)
