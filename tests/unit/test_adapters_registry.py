"""Every registered adapter loads and describes itself; a missing CLI is a failed step that says how to install it."""

from __future__ import annotations

import pytest

from loope.agents import registry
from loope.errors import LoopeError
from tests.unit.adapter_fakes import fake_binary, make_request

CLI_ADAPTERS = ["gemini", "opencode", "cursor", "amp", "copilot", "goose", "aider", "qwen", "kiro"]


@pytest.mark.parametrize("name", registry.known())
def test_every_registered_adapter_imports_with_a_complete_info(name):
    cls = registry.adapter_class(name)
    info = registry.info(name)

    assert cls.info is info  # what `loope adapters` reads without loading the adapter is what it runs with
    assert info.name == name == cls.name
    assert info.install.strip()
    assert info.read_only.strip()
    assert info.summary.strip()
    assert info.cost_source.split(" ")[0].rstrip(":") in {"reported", "estimated", "none"}
    if info.binary is not None:
        assert info.binary.strip()
        assert info.version_args
        assert info.auth_env or info.login_files, "loope doctor needs a way to find credentials"
        assert cls.binary_env_var() == f"LOOPE_{name.upper().replace('-', '_')}_BIN"


@pytest.mark.parametrize("name", CLI_ADAPTERS)
def test_a_configured_binary_that_does_not_exist_fails_the_step_naming_the_setting(name, tmp_path, monkeypatch):
    cls = registry.adapter_class(name)
    missing = tmp_path / "no-such-dir" / name
    monkeypatch.setenv(cls.binary_env_var(), str(missing))

    result = cls(None, options={}).run(make_request(tmp_path))

    assert not result.ok
    assert result.error == f"{name}: {missing} does not exist; fix [agents.{name}] bin or {cls.binary_env_var()}"


@pytest.mark.parametrize("name", CLI_ADAPTERS)
def test_a_cli_missing_from_path_fails_the_step_with_the_install_command(name, tmp_path, monkeypatch):
    cls = registry.adapter_class(name)
    monkeypatch.delenv(cls.binary_env_var(), raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    result = cls(None, options={}).run(make_request(tmp_path))

    assert not result.ok
    assert result.error == (
        f"{name} is not installed ({cls.info.binary} not found on PATH); install it with: {cls.info.install}"
    )
    assert not (tmp_path / "step" / "transcript.jsonl").exists()


@pytest.mark.parametrize("name", CLI_ADAPTERS)
def test_preflight_names_a_missing_cli_before_the_run_starts(name, tmp_path, monkeypatch):
    cls = registry.adapter_class(name)
    monkeypatch.delenv(cls.binary_env_var(), raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    agent = cls(None, options={})
    assert agent.preflight(tmp_path) == (
        f"{name} is not installed ({cls.info.binary} not found on PATH); install it with: {cls.info.install}"
    )
    assert cls(None, options={"bin": "./bin/agent"}).preflight(tmp_path) == (
        f"{name}: ./bin/agent does not exist; fix [agents.{name}] bin or {cls.binary_env_var()}"
    )
    (tmp_path / "bin").mkdir()
    fake_binary(tmp_path / "bin", "exit 0", name="agent")
    assert cls(None, options={"bin": "./bin/agent"}).preflight(tmp_path) is None


@pytest.mark.parametrize("name", CLI_ADAPTERS)
def test_the_spec_model_and_loope_toml_args_reach_the_command_line(name, tmp_path):
    agent = registry.create(registry.parse(f"{name}:vendor/some-model-1"), {"args": ["--extra-flag"]})
    argv = agent.argv(make_request(tmp_path))

    assert agent.model == "vendor/some-model-1"
    assert "--extra-flag" in argv
    flag = "--mode" if name == "amp" else "--model"
    expected = "some-model-1" if name == "goose" else "vendor/some-model-1"  # goose: --provider vendor
    assert argv[argv.index(flag) + 1] == expected


@pytest.mark.parametrize("name", CLI_ADAPTERS)
def test_the_prompt_travels_as_an_argument_and_stdin_is_closed(name, tmp_path):
    # The stand-in records its stdin (which must be empty and closed: opencode and amp wait for its end).
    body = f'cat > {tmp_path}/stdin.txt\nfor a in "$@"; do printf "%s\\n" "$a"; done > {tmp_path}/args.txt\nexit 0'
    cls = registry.adapter_class(name)
    request = make_request(tmp_path, timeout_s=60)
    cls(None, options={"bin": fake_binary(tmp_path, body)}).run(request)

    assert (tmp_path / "stdin.txt").read_text() == ""
    assert request.prompt in (tmp_path / "args.txt").read_text()


def test_the_command_line_is_recorded_in_the_step_dir_without_the_prompt(tmp_path):
    import json

    from loope.agents.base import AgentRequest
    from loope.agents.registry import AgentSpec, create

    fake = tmp_path / "gemini"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    agent = create(AgentSpec("gemini", "gemini-2.5-pro"), {"bin": str(fake), "args": ["--debug"]})
    step = tmp_path / "step"
    step.mkdir()
    prompt = "Fix the add function.\nIt subtracts."
    request = AgentRequest(
        role="implementer", prompt=prompt, workspace=tmp_path, step_dir=step, run_id="0001-x",
        run_dir=tmp_path, iteration=1, state_file=tmp_path / "state.md",
    )  # fmt: skip
    agent.run(request)
    argv = json.loads((step / "argv.json").read_text())
    assert argv[0] == str(fake)
    assert "--debug" in argv
    assert "gemini-2.5-pro" in argv
    assert not any(prompt in a for a in argv)
    assert any("<prompt.md>" in a for a in argv)


def test_a_prompt_too_long_for_an_argument_travels_as_a_pointer_to_prompt_md(tmp_path):
    import json

    from loope.agents.base import AgentRequest
    from loope.agents.process import ARGUMENT_PROMPT_LIMIT

    seen = tmp_path / "args.txt"
    fake = tmp_path / "gemini"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}\n')
    fake.chmod(0o755)
    step = tmp_path / "step"
    step.mkdir()
    prompt = "x" * (ARGUMENT_PROMPT_LIMIT + 50_000)
    (step / "prompt.md").write_text(prompt)
    request = AgentRequest(
        role="implementer", prompt=prompt, workspace=tmp_path, step_dir=step, run_id="0001-x",
        run_dir=tmp_path, iteration=1, state_file=tmp_path / "state.md",
    )  # fmt: skip

    registry.create(registry.AgentSpec("gemini"), {"bin": str(fake)}).run(request)

    args = seen.read_text()
    assert prompt not in args
    assert f"Your instructions are in the file {step / 'prompt.md'}" in args
    assert json.loads((step / "argv.json").read_text())[0] == str(fake)


@pytest.mark.parametrize(
    ("text", "advice"),
    [
        ("Error: 401 Unauthorized", "not logged in"),
        ("API Error: 429 Too Many Requests", "rate limited"),
        ("litellm.AuthenticationError: Incorrect API key provided", "not logged in"),
        ("OAuth token has expired", "not logged in"),
        ("FAILED tests/test_authentication.py::test_login - assert False", None),
        ('File "calc.py", line 429, in add', None),
        ("2 tests expired caches were rebuilt", None),
    ],
)
def test_login_and_rate_limit_advice_only_for_what_says_so(text, advice):
    from loope.agents.failure import classify

    found = classify(text)
    assert (found is None) if advice is None else (advice in (found or ""))


def test_acp_specs_name_any_command_and_the_presets() -> None:
    spec = registry.parse("acp:gemini --experimental-acp")
    assert (spec.name, spec.command, str(spec)) == ("acp", "gemini --experimental-acp", "acp:gemini --experimental-acp")
    assert registry.create(spec).argv() == ["gemini", "--experimental-acp"]
    preset = registry.parse("codex-acp:gpt-5.5")
    assert (preset.name, preset.model) == ("codex-acp", "gpt-5.5")
    assert registry.create(preset, {"bin": "/opt/codex-acp"}).argv() == ["/opt/codex-acp", "-c", 'model="gpt-5.5"']
    assert registry.create(registry.parse("gemini-acp")).argv()[1:] == ["--experimental-acp"]
    with pytest.raises(LoopeError, match="acp: needs the command that starts the agent"):
        registry.parse("acp:  ")
    assert {"acp", "claude-acp", "codex-acp", "gemini-acp"} <= set(registry.known())
