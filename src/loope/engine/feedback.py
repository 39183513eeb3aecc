"""Pure composition of what the next iteration is told about the last one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from loope.record import record
from loope.verify.report import MAX_FAILURES, GateReport, tail


@record(frozen=True)
class Findings:
    """What went wrong in one iteration, gathered for the next one."""

    iteration: int
    gate: GateReport | None = None
    blockers: Sequence[tuple[str, str]] = ()
    """(who, findings) for each reviewer or verifier that blocked."""
    violations: Sequence[str] = ()
    success: GateReport | None = None
    metric_note: str | None = None
    notes: Sequence[str] = field(default_factory=tuple)


def failure_signature(failures: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    return tuple(sorted(f"{test}: {message}" for test, message in failures))


def _command_section(title: str, report: GateReport) -> list[str]:
    if report.timed_out:
        status = "timed out"
    else:
        status = f"exit code {report.exit_code}" if report.exit_code is not None else "did not run"
    out = [f"### {title} failed ({status}): `{report.command}`"]
    if report.failures:
        out.append("Failing checks:")
        for test, message in list(report.failures)[:MAX_FAILURES]:
            out.append(f"- `{test}`" + (f": {message}" if message else ""))
        more = max(report.failing, len(report.failures)) - min(len(report.failures), MAX_FAILURES)
        if more > 0:
            out.append(f"- … and {more} more")
    shown = tail(report.output)
    if shown:
        out += ["Last lines of its output:", "```text", shown, "```"]
    return out


def compose(findings: Findings) -> str:
    """Markdown for the next implementer prompt, or '' when there is nothing to act on."""
    parts: list[str] = []
    if findings.violations:
        parts.append("### Changes that were undone")
        parts += [f"- {v}" for v in findings.violations]
    if findings.gate and not findings.gate.passed:
        parts += _command_section("The verify command", findings.gate)
    if findings.success and not findings.success.passed:
        parts += _command_section("The success command", findings.success)
    for who, text in findings.blockers:
        parts.append(f"### {who} blocked: address these blocking findings")
        parts.append(text.strip() or "(no findings given)")
    if findings.metric_note:
        parts += ["### Score", findings.metric_note]
    parts += list(findings.notes)
    if not parts:
        return ""
    return "\n".join([f"## Feedback from iteration {findings.iteration}", *parts]) + "\n"


def feedback_key(findings: Findings) -> list[str]:
    """What the feedback says, without iteration numbers or timings: tells fresh feedback from a repeat.

    Empty when there is nothing to act on (no violation, failing check or blocking review).
    """
    key = [f"violation: {v}" for v in findings.violations]
    for report in (findings.gate, findings.success):
        if report is not None and not report.passed:
            key.append(f"{report.command}: exit {report.exit_code}")
            key += list(failure_signature(report.failures))
    key += [f"{who}: {text.strip()}" for who, text in findings.blockers]
    return key
