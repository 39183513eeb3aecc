"""A race under the user's control: ``loope stop --now`` kills every candidate in flight, and a race of
three different agents (claude, the stub and an exec: program) runs end to end."""

from __future__ import annotations

import json

from tests.conftest import FIXED_CALC, GATE, alive_in_group, git, gone
from tests.integration.test_candidate_budgets import cap, claude_in_place
from tests.integration.test_control import DEADLINE_S, loope, runners, wait_for

__all__ = ["runners"]  # a fixture used here


def test_stop_now_during_a_round_kills_every_candidate_and_all_they_started(project, agent_script, tmp_path, runners):
    pids = [tmp_path / f"pids-{i}.json" for i in (1, 2)]
    body = f"""
    import subprocess, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    mine = pathlib.Path({str(tmp_path)!r}) / ("pids-" + os.environ["LOOPE_CANDIDATE"] + ".json")
    mine.write_text(json.dumps([os.getpid(), child.pid, os.getpgid(0)]))
    time.sleep(300)
    """
    runner = runners.start(
        "run", "fix add", "--implementer", agent_script(body), "--candidates", "2", "--no-review",
        "--verify-cmd", GATE, "--plain", "--sandbox", "off",
    )  # fmt: skip
    wait_for(lambda: all(p.exists() and p.read_text() for p in pids), "both candidates to start their children")
    run_id = project.runs()[-1].name
    stopped = loope(project.path, "stop", run_id, "--now")
    assert stopped.returncode == 0, stopped.stderr
    assert runner.wait(timeout=DEADLINE_S) == 1, runners.log()
    run = project.run_json()
    assert (run["status"], run["stop_reason"]) == ("stopped", "stopped")
    assert sorted(s["candidate"] for s in run["steps"] if s["role"] == "implementer") == [1, 2]
    assert not any(s["ok"] for s in run["steps"])
    for path in pids:
        agent, child, group = json.loads(path.read_text())
        assert gone(agent)
        assert gone(child)
        assert alive_in_group(group) == []
    assert not (project.runs()[-1] / "candidates").exists()


def test_a_race_of_three_different_agents_keeps_the_one_that_passes(project, agent_script, cli, monkeypatch):
    report = claude_in_place(project, monkeypatch)
    fixer = agent_script(f"pathlib.Path('calc.py').write_text({FIXED_CALC!r})\nprint('fixed add')\n")
    result = cli(
        "run", "fix add", "--implementer", "claude", "--implementer", "stub", "--implementer", fixer,
        "--no-review", "--verify-cmd", GATE, "--max-cost", "3", "--max-iters", "1", "--plain",
        "--sandbox-writable", str(report), "--workspace", "worktree", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    (round_,) = run["rounds"]
    assert {c["candidate"]: c["agent"] for c in round_["candidates"]} == {1: "claude", 2: "stub", 3: "exec"}
    assert round_["winner"] == 3
    assert cap(json.loads((report / "1-1.json").read_text())) == "1"  # $3 left, three candidates
    assert git(project.path, "show", f"{run['workspace']['branch']}:calc.py") == FIXED_CALC
    assert "★ candidate 3 (exec) won" in result.out
