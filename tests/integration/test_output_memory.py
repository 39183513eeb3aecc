"""An agent that prints 200 MB keeps the runner's memory bounded; the transcript keeps every byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

OUTPUT = 200_000_000
RSS_LIMIT_KB = 100 * 1024

AGENTS = {
    "many lines": "yes 'a line of agent output, like a long log would have' | head -c {n}; echo; echo the end\n",
    "one line": "head -c {n} /dev/zero | tr '\\000' x; echo; echo the end\n",
}

# Runs `loope run` as a child and prints the largest resident set of that child and its children
# (git, the agent): the runner is the largest of them, so the figure bounds the runner.
MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


@pytest.mark.parametrize("shape", sorted(AGENTS))
def test_a_200_mb_agent_keeps_the_runner_under_100_mb(project, tmp_path: Path, shape: str) -> None:
    agent = tmp_path / "loud.sh"
    agent.write_text("#!/bin/sh\n" + AGENTS[shape].format(n=OUTPUT))
    agent.chmod(0o755)
    loope = [sys.executable, "-m", "loope", "run", "print a lot", "--implementer", f"exec:{agent}"]
    argv = [sys.executable, "-c", MEASURE, *loope, "--no-review", "--max-iters", "1", "--quiet"]
    done = subprocess.run(argv, cwd=project.path, capture_output=True, text=True, check=True)
    code, peak_kb = map(int, done.stdout.split())
    assert code == 1  # max_iters: the run itself went through
    assert peak_kb < RSS_LIMIT_KB, f"peak RSS {peak_kb} KB"
    step = project.runs()[-1] / "agents" / "01-implementer-exec"
    assert (step / "transcript.log").stat().st_size > OUTPUT
    result = (step / "result.md").read_text()
    assert len(result) < 200_000
    assert result.rstrip().endswith("the end")
    assert "characters cut here" in result
