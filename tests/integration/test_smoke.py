from tests.conftest import GATE


def test_gate_failure_is_fed_back_and_fixed(project, agent_script, cli):
    implementer = agent_script(
        """
        src = pathlib.Path("calc.py")
        if "test_add_negative" in prompt:
            src.write_text("def add(a, b):\\n    return a + b\\n")
        else:
            src.write_text("def add(a, b):\\n    return abs(a) + abs(b)\\n")
        print("changed add")
        """
    )
    result = cli("run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert run["status"] == "converged"
    assert run["iterations"] == 2
    second_prompt = (project.runs()[0] / "agents" / "03-implementer-exec" / "prompt.md").read_text()
    assert "test_add_negative" in second_prompt
    assert project.read("calc.py") == "def add(a, b):\n    return a - b\n"  # the user's tree is untouched
