"""The success command's environment: exactly PATH, HOME, LANG, TERM and TOOL_INPUT."""

from __future__ import annotations

import json
import os
from pathlib import Path

PASSED_THROUGH = ("PATH", "HOME", "LANG", "TERM")


def success_env(run_id: str, workspace: Path) -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_THROUGH if name in os.environ}
    env["TOOL_INPUT"] = json.dumps({"loop_id": run_id, "workspace": str(workspace)})
    return env
