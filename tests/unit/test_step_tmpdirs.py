"""A step's private /tmp goes once the step is over: removed on a thread, waited for as the run ends."""

from __future__ import annotations

from pathlib import Path

from loope.sandbox import UNSANDBOXED, tmpdirs


def test_a_closed_steps_tmp_dir_is_gone_once_the_removals_are_waited_for(tmp_path: Path) -> None:
    box = UNSANDBOXED.check("true", tmp_path)
    _, env = box.enter(("true",), {})
    tmp = Path(env["TMPDIR"])
    (tmp / "deep" / "er").mkdir(parents=True)
    (tmp / "deep" / "er" / "file").write_text("left by the step")
    box.close()
    tmpdirs.wait()
    assert not tmp.exists()


def test_many_are_removed_in_the_order_they_came(tmp_path: Path) -> None:
    dirs = [tmp_path / f"step-{n}" for n in range(20)]
    for path in dirs:
        (path / "sub").mkdir(parents=True)
        tmpdirs.remove_later(path)
    tmpdirs.wait()
    assert not any(path.exists() for path in dirs)
