"""Pure selection between an iteration's candidates: the ranking, and why each one lost.

The order: a candidate whose step failed, then one the guard had to correct, ranks below every
other; then the gate passed; in metric mode the better score, where a difference smaller than
``--min-improvement`` is a tie; ties go to fewer failing checks, then the smaller diff, then the
lower candidate number. Reviewers come after the ranking (engine/candidates.py): they review the
leading passing candidate, and the next one when they block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from loope.engine.decide import MetricRules, improves


@dataclass(frozen=True)
class Contender:
    """What selection knows of one candidate."""

    index: int
    ok: bool
    gate_passed: bool | None
    failing: int | None
    score: float | None = None
    violations: int = 0
    diff_lines: int = 0

    @property
    def tier(self) -> int:
        """0 passed (or no gate), 1 failed the gate, 2 broke a rule, 3 the step failed."""
        if not self.ok:
            return 3
        if self.violations:
            return 2
        return 1 if self.gate_passed is False else 0

    @property
    def passed(self) -> bool:
        return self.tier == 0


def _metric_order(a: Contender, b: Contender, metric: MetricRules) -> int:
    """-1 when ``a`` scores better than ``b`` by more than the noise, 1 the other way, 0 a tie."""
    if a.score is None or b.score is None:
        return (a.score is None) - (b.score is None)
    if improves(a.score, b.score, metric.direction, metric.min_improvement):
        return -1
    if improves(b.score, a.score, metric.direction, metric.min_improvement):
        return 1
    return 0


def _tie_key(c: Contender) -> tuple[float, int, int]:
    return (math.inf if c.failing is None else c.failing, c.diff_lines, c.index)


def beats(a: Contender, b: Contender, metric: MetricRules | None) -> bool:
    """Whether ``a`` ranks above ``b``."""
    if a.tier != b.tier:
        return a.tier < b.tier
    if metric is not None and a.passed:
        order = _metric_order(a, b, metric)
        if order:
            return order < 0
    return _tie_key(a) < _tie_key(b)


def rank(contenders: list[Contender], metric: MetricRules | None = None) -> list[Contender]:
    """Best first: the best of the rest, again and again (a noise tie is not transitive, this is stable)."""
    remaining = list(contenders)
    ranked: list[Contender] = []
    while remaining:
        best = remaining[0]
        for other in remaining[1:]:
            if beats(other, best, metric):
                best = other
        ranked.append(best)
        remaining.remove(best)
    return ranked


def _score(value: float | None) -> str:
    return "no score" if value is None else f"score {value:g}"


def strengths(c: Contender, metric: MetricRules | None) -> str:
    """What the winner had going for it."""
    if c.tier == 3:
        return "every candidate failed; the first is kept for the record"
    if c.tier == 2:
        return "every candidate broke a rule; the least bad one"
    parts = ["gate passed" if c.gate_passed else ("no gate" if c.gate_passed is None else "gate failed")]
    if c.tier == 1 and c.failing is not None:
        parts[0] += f" ({c.failing} failing)"
    if metric is not None and c.passed:
        parts.append(_score(c.score))
    parts.append(f"{c.diff_lines} changed line(s)")
    return ", ".join(parts)


def why_lost(loser: Contender, winner: Contender, metric: MetricRules | None) -> str:
    """One line: why ``loser`` ranked below ``winner``."""
    if not loser.ok:
        return "its step failed"
    if loser.violations:
        return f"the guard undid {loser.violations} of its change(s)"
    if loser.gate_passed is False and winner.tier == 0:
        count = f" ({loser.failing} failing)" if loser.failing is not None else ""
        return f"its gate failed{count}"
    if metric is not None and loser.passed and winner.passed:
        order = _metric_order(winner, loser, metric)
        if order < 0:
            return f"{_score(loser.score)} against {_score(winner.score)}"
    if (loser.failing or 0) != (winner.failing or 0) and loser.failing is not None:
        return f"a tie, with more failing checks ({loser.failing} against {winner.failing})"
    if loser.diff_lines != winner.diff_lines:
        return f"a tie, with a larger diff ({loser.diff_lines} against {winner.diff_lines} lines)"
    return "a tie, and a later candidate"
