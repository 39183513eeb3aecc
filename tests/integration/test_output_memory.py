"""An agent that prints 200 MB keeps the runner's memory bounded; the transcript keeps every byte.

The same holds for the CLIs that stream their reply in deltas (a JSON line per chunk): a reply of a
million chunks, after a hundred thousand tool calls each with its own id.
"""

from __future__ import annotations

import os
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


CHUNKS = 1_000_000
TOOL_CALLS = 100_000
# Each streaming CLI: its first line, a tool call with id $1 (awk), one chunk of the reply, the reply's
# last chunk and its terminal line.
STREAMS = {
    "gemini": (
        '{"type":"init","model":"gemini-2.5-pro"}',
        '{"type":"tool_use","tool_name":"read_file","tool_id":"call-"$1"","parameters":{"file_path":"a.txt"}}',
        '{"type":"message","role":"assistant","content":"a chunk of the reply, as the model streams it ","delta":true}',
        '{"type":"message","role":"assistant","content":"the end","delta":true}',
        '{"type":"result","status":"success","stats":{"input_tokens":10,"output_tokens":20}}',
    ),
    "goose": (
        '{"type":"message","message":{"id":"m0","role":"user","content":[{"type":"text","text":"go"}]}}',
        '{"type":"message","message":{"id":"m1","role":"assistant","content":[{"type":"toolRequest",'
        '"id":"call-"$1"","toolCall":{"status":"success","value":{"name":"shell","arguments":{"command":"ls"}}}}]}}',
        '{"type":"message","message":{"id":"m2","role":"assistant","content":[{"type":"text",'
        '"text":"a chunk of the reply, as the model streams it "}]}}',
        '{"type":"message","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"the end"}]}}',
        '{"type":"complete","total_tokens":30,"input_tokens":10,"output_tokens":20}',
    ),
}


@pytest.mark.parametrize("adapter", sorted(STREAMS))
def test_a_reply_streamed_in_a_million_chunks_keeps_the_runner_under_100_mb(project, tmp_path, adapter) -> None:
    first, tool, chunk, last, final = STREAMS[adapter]
    cli = tmp_path / adapter
    awk_tool = tool.replace('"', '\\"').replace('\\"$1\\"', '" $1 "')
    cli.write_text(
        "#!/bin/sh\n"
        f"echo '{first}'\n"
        f"seq {TOOL_CALLS} | awk '{{print \"{awk_tool}\"}}'\n"
        f"yes '{chunk}' | head -n {CHUNKS}\n"
        f"echo '{last}'\necho '{final}'\n"
    )
    cli.chmod(0o755)
    env = {**os.environ, f"LOOPE_{adapter.upper()}_BIN": str(cli), "GEMINI_API_KEY": "test-key"}
    loope = [sys.executable, "-m", "loope", "run", "stream a lot", "--implementer", adapter]
    argv = [sys.executable, "-c", MEASURE, *loope, "--no-review", "--max-iters", "1", "--quiet"]
    done = subprocess.run(argv, cwd=project.path, capture_output=True, text=True, check=True, env=env)
    code, peak_kb = map(int, done.stdout.split())
    step = project.runs()[-1] / "agents" / f"01-implementer-{adapter}"
    assert code == 1, (step / "result.md").read_text()[-500:]  # max_iters: the step itself succeeded
    assert peak_kb < RSS_LIMIT_KB, f"peak RSS {peak_kb} KB"
    assert (step / "transcript.jsonl").stat().st_size > CHUNKS * len(chunk)
    result = (step / "result.md").read_text()
    assert len(result) < 200_000
    assert result.rstrip().endswith("the end")
    assert "characters cut here" in result
