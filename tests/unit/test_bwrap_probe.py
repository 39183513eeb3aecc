"""Bubblewrap's probe is asked once per process, however many threads ask at once (a run asks it on the
thread that captures the user's state while its main thread may ask too)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_threads_asking_at_once_start_one_probe_and_get_one_answer(tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\nsleep 0.3\nexit 0\n")  # slow enough for every thread to ask while it runs
    fake.chmod(0o755)
    script = textwrap.dedent(
        """
        import sys, threading
        started = []
        sys.addaudithook(lambda event, args: started.append(args[0]) if event == "subprocess.Popen" else None)
        from loope import bwrap_probe
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(bwrap_probe.support())) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(len([p for p in started if str(p).endswith("bwrap")]), len(set(answers)), answers[0].works)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.split() == ["1", "1", "True"], done.stderr
