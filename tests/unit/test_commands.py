"""Which workspace files a gate or metric command runs (workspace/commands.py), in every shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from loope.workspace.commands import files_and_shadows, scripts_in


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    files = {
        "score.py": "import helpers\nfrom lib import stats\nfrom . import nothing\n",
        "helpers.py": "import os\nimport solution\n",
        "solution.py": "SCORE = 1\n",
        "lib/__init__.py": "",
        "lib/stats.py": "from .util import mean\n",
        "lib/util.py": "def mean(x): return x\n",
        "tools/score.py": "import tool_helper\n",
        "tools/tool_helper.py": "",
        "bench/__init__.py": "",
        "bench/__main__.py": "from bench import core\n",
        "bench/core.py": "",
        "run.sh": "#!/bin/sh\ncd tools && python score.py\n",
        "measure": "#!/usr/bin/env bash\npython3 helpers.py\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python score.py", ["score.py"]),
        ("cd tools && python score.py", ["tools/score.py"]),
        ("cd tools; python3 -u score.py --quick", ["tools/score.py"]),
        ("sh -c 'python score.py'", ["score.py"]),
        ('bash -c "cd tools && python score.py"', ["tools/score.py"]),
        ("python -m bench", ["bench/__init__.py", "bench/__main__.py"]),
        ("python -X dev -m lib.stats", ["lib/__init__.py", "lib/stats.py"]),
        ("./run.sh", ["run.sh", "tools/score.py"]),
        ("sh run.sh", ["run.sh", "tools/score.py"]),
        ("./measure | tail -1", ["helpers.py", "measure"]),
        ("env FOO=1 python score.py", ["score.py"]),
        ("PYTHONHASHSEED=0 python score.py > out.txt", ["score.py"]),
        ("python /etc/passwd", []),
        ("python ../outside.py", []),
        ("echo 'unbalanced", []),
    ],
)
def test_the_scripts_a_command_runs(tree: Path, command: str, expected: list[str]) -> None:
    assert scripts_in(command, tree) == expected


def test_a_metric_follows_local_imports(tree: Path) -> None:
    assert scripts_in("python score.py", tree, follow_imports=True) == [
        "helpers.py",
        "lib/__init__.py",
        "lib/stats.py",
        "lib/util.py",
        "score.py",
        "solution.py",
    ]
    assert scripts_in("cd tools && python score.py", tree, follow_imports=True) == [
        "tools/score.py",
        "tools/tool_helper.py",
    ]
    assert scripts_in("python -m bench", tree, follow_imports=True) == [
        "bench/__init__.py",
        "bench/__main__.py",
        "bench/core.py",
    ]


def test_python_m_names_the_files_that_would_shadow_it(tree: Path) -> None:
    assert files_and_shadows("python -m pytest -q", tree)[1] == ["/pytest.py", "/pytest/"]
    assert files_and_shadows("cd tools && python -m pytest", tree)[1] == ["/tools/pytest.py", "/tools/pytest/"]


def test_a_cycle_of_imports_and_scripts_ends(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("import a\n")
    (tmp_path / "loop.sh").write_text("sh loop.sh\npython a.py\n")
    assert scripts_in("sh loop.sh", tmp_path, follow_imports=True) == ["a.py", "b.py", "loop.sh"]
