"""The copilot adapter's usage file: one it cannot read costs the token counts, never the step."""

from __future__ import annotations

from pathlib import Path

import pytest

from loope.agents.copilot import _usage_file

UNREADABLE = Path("/proc/self/mem")  # a regular file whose first read fails with EIO, even for root


@pytest.mark.skipif(not UNREADABLE.is_file(), reason="needs Linux /proc")
def test_an_unreadable_usage_file_gives_no_usage_instead_of_an_error(tmp_path: Path) -> None:
    assert _usage_file(UNREADABLE) is None
    half_written = tmp_path / "copilot-usage.json"
    half_written.write_text('{"modelMetrics": {')
    assert _usage_file(half_written) is None
    assert _usage_file(tmp_path / "missing.json") is None
