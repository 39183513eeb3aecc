"""`loope serve` in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium).

Real runs (scripted exec: agents, real git) in real processes; the dashboard is a real server; pages are
drawn by the browser from the JSON and server-sent events the server sends. Waits are bounded polls on
what the page shows. Screenshots go to the test's tmp dir (and to $LOOPE_SCREENSHOTS when it is set).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import GATE, one_error_line
from tests.integration.test_candidates import SECOND_FIXES
from tests.integration.test_control import DONE, finished, marks, runners, wait_for, waiting
from tests.integration.test_metric_mode import METRIC, scored

__all__ = ["marks", "runners", "scored"]  # fixtures used here

CHROMIUM = Path("/usr/bin/chromium")
DRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 120.0
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1400",
]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    if not (CHROMIUM.exists() and DRIVER.exists()):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromium-driver are missing; `make test` installs them")
        pytest.skip("chromium and chromium-driver are not installed (`make test` installs them as root)")
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=str(DRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def until(driver, condition, what: str):  # type: ignore[no-untyped-def]
    """Poll ``condition(driver)`` until it is truthy; fail saying ``what`` never happened."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(
            driver, WAIT_S, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException]
        ).until(condition)
    except TimeoutException:
        pytest.fail(f"waited {WAIT_S:.0f}s for {what}; the page says:\n{driver.find_element('tag name', 'body').text}")


def screenshot(driver, tmp_path: Path, name: str, *, docs: bool = True) -> Path:  # type: ignore[no-untyped-def]
    """Save the page as ``name`` in the tmp dir; the ones for the docs also in $LOOPE_SCREENSHOTS (docs/)."""
    path = tmp_path / name
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 0
    if docs and os.environ.get("LOOPE_SCREENSHOTS"):
        shutil.copy(path, Path(os.environ["LOOPE_SCREENSHOTS"]) / name)
    return path


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[str]

    @property
    def origin(self) -> str:
        return self.url.rstrip("/")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[object]:
    started: list[Server] = []

    def start(project: Path, *args: str) -> Server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loope", "serve", "--port", "0", "--workdir", str(project), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("loope dashboard: http://127.0.0.1:"), first + (proc.stdout.read() or "")
        server = Server(first.split()[2], proc)
        started.append(server)
        return server

    yield start
    for server in started:
        server.proc.terminate()
        try:
            server.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.proc.kill()


@dataclass
class Dash:
    """A browser, the dashboards a test starts, and where the screenshots go."""

    browser: object
    serve: object
    shots: Path


@pytest.fixture
def dash(browser, serve, tmp_path: Path) -> Dash:  # type: ignore[no-untyped-def]
    return Dash(browser, serve, tmp_path)


def post(url: str, *, token: str | None, origin: str | None, host: str | None = None) -> tuple[int, dict]:
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["x-loope-token"] = token
    if origin is not None:
        headers["origin"] = origin
    if host is not None:
        headers["host"] = host
    request = urllib.request.Request(url, data=b"{}", headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def page_token(driver) -> str:  # type: ignore[no-untyped-def]
    return driver.find_element("css selector", 'meta[name="loope-token"]').get_attribute("content")


def released(marks: Path) -> str:
    """An agent body: iteration ``n`` writes marks/started-N, then waits for marks/go-N."""
    return f"""
import time
marks = pathlib.Path({str(marks)!r})
n = int(os.environ["LOOPE_ITERATION"])
pathlib.Path(f"step-{{n}}.txt").write_text(f"iteration {{n}}\\n")
print(json.dumps({{"type": "message", "text": f"working on iteration {{n}}"}}), flush=True)
(marks / f"started-{{n}}").touch()
deadline = time.monotonic() + {WAIT_S}
while not (marks / f"go-{{n}}").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
print(f"iteration {{n}} done")
"""


def test_the_runs_list_shows_a_run_started_while_the_page_is_open(project, agent_script, marks, runners, dash):
    browser, serve, tmp_path = dash.browser, dash.serve, dash.shots
    server = serve(project.path)
    browser.get(server.url)
    until(browser, lambda d: d.find_elements("id", "no-runs"), "the empty list")
    runners.start("run", "write notes", "--implementer", agent_script(waiting(marks, then=DONE)), "--no-review")
    wait_for((marks / "started-1").exists, "the run to start")
    run_id = project.runs()[-1].name
    row = f'tr[data-run="{run_id}"]'

    def live_and_running(d) -> bool:  # type: ignore[no-untyped-def]  # read whole, again if the row was redrawn
        return bool(
            d.find_elements("css selector", f"{row} .live-dot")
            and d.find_element("css selector", f"{row} [data-status]").text == "running"
            and "write notes" in d.find_element("css selector", row).text
        )

    until(browser, live_and_running, "the new run, live and running, in the list")
    (marks / "release").touch()
    until(
        browser,
        lambda d: d.find_element("css selector", f"{row} [data-status]").text == "converged",
        "the list to show the run converged",
    )
    assert not browser.find_elements("css selector", f"{row} .live-dot")
    screenshot(browser, tmp_path, "dashboard-runs.png")


def test_the_run_page_follows_the_loop_and_stop_stops_it(project, agent_script, marks, runners, dash):
    browser, serve, tmp_path = dash.browser, dash.serve, dash.shots
    runners.start("run", "step by step", "--implementer", agent_script(released(marks)), "--no-review",
                  "--max-iters", "5", "--stall-after", "9")  # fmt: skip
    wait_for((marks / "started-1").exists, "iteration 1 to start")
    rundir = project.runs()[-1]
    server = serve(project.path)
    browser.get(f"{server.url}runs/0/{rundir.name}")
    iteration = lambda d: d.find_element("id", "iteration").text  # noqa: E731 - a short query read twice
    until(browser, lambda d: d.find_elements("id", "iteration") and iteration(d) == "1/5", "iteration 1/5")
    until(browser, lambda d: "working on iteration 1" in d.find_element("tag name", "body").text, "the agent's message")
    (marks / "go-1").touch()
    until(browser, lambda d: iteration(d) == "2/5", "the page to move on to iteration 2/5 by itself")
    until(browser, lambda d: "step-1.txt" in d.find_element("id", "diff").text, "the diff so far")
    screenshot(browser, tmp_path, "dashboard-run-live.png", docs=False)
    until(browser, lambda d: d.find_element("id", "stop").click() or True, "Stop to take a click")  # redraws: retried
    until(browser, lambda d: "stop requested" in d.find_element("id", "message").text, "the stop to be acknowledged")
    (marks / "go-2").touch()
    wait_for(lambda: finished(rundir), "the run to stop")
    record = json.loads((rundir / "run.json").read_text())
    assert (record["status"], record["iterations"]) == ("stopped", 2)
    until(
        browser,
        lambda d: d.find_element("css selector", "h1 [data-status]").text == "stopped",
        "the page to say stopped",
    )
    assert not browser.find_elements("id", "stop")  # no Stop button on a finished run
    assert not (marks / "started-3").exists()


def test_the_metric_chart_has_one_mark_per_attempt(scored, agent_script, cli, dash):
    proj, serve, browser, tmp_path = scored, dash.serve, dash.browser, dash.shots
    body = """
    scores = {1: 8, 2: 9, 3: 6, 4: 7, 5: 4}
    n = int(os.environ["LOOPE_ITERATION"])
    pathlib.Path("solution.py").write_text(f"SCORE = {scores[n]}\\n")
    print(f"set SCORE to {scores[n]}")
    """
    result = cli(
        "run", "lower the score", "--implementer", agent_script(body), "--no-review", "--metric-cmd",
        METRIC, "--direction", "lower", "--editable", "solution.py", "--target", "2", "--max-iters", "5",
        "--patience", "9", "--plain", cwd=proj.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    rundir = proj.runs()[-1]
    verdicts = [line.split("\t")[3] for line in (rundir / "score.log").read_text().splitlines()]
    assert verdicts == ["kept", "reverted", "kept", "reverted", "kept"]
    server = serve(proj.path)
    browser.get(f"{server.url}runs/0/{rundir.name}")
    until(browser, lambda d: d.find_elements("css selector", "#chart circle.mark"), "the chart's marks")
    marks = browser.find_elements("css selector", "#chart circle.mark")
    assert [m.get_attribute("class") for m in marks] == [f"mark {v}" for v in verdicts]
    assert [m.get_attribute("data-iteration") for m in marks] == ["1", "2", "3", "4", "5"]
    assert browser.find_elements("css selector", "#chart line.baseline")
    assert browser.find_elements("css selector", "#chart line.target")
    assert browser.find_elements("css selector", "#chart polyline.best")
    step = 'tr.step[data-step="02-implementer-exec"]'
    until(browser, lambda d: d.find_element("css selector", step).click() or True, "the step to take a click")
    until(browser, lambda d: d.find_elements("css selector", '#step-file pre[data-file="prompt.md"]'), "the prompt")
    assert "lower the score" in browser.find_element("id", "step-file").text
    screenshot(browser, tmp_path, "dashboard-run.png")


def test_a_raced_iteration_shows_its_candidates_with_the_winner_marked(project, agent_script, cli, dash):
    agent = agent_script(SECOND_FIXES)
    result = cli(
        "run", "fix add", "--implementer", agent, "--candidates", "2", "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    rundir = project.runs()[-1]
    server = dash.serve(project.path)
    dash.browser.get(f"{server.url}runs/0/{rundir.name}")
    until(dash.browser, lambda d: d.find_elements("css selector", "#candidates tr.candidate"), "the candidates")
    rows = dash.browser.find_elements("css selector", "#candidates tr.candidate")
    assert [(r.get_attribute("data-candidate"), r.get_attribute("class")) for r in rows] == [
        ("2", "candidate winner"),
        ("1", "candidate"),
    ]
    assert rows[0].text.startswith("★ 1.2")
    assert "lost: its gate failed" in rows[1].text
    assert dash.browser.find_elements("css selector", 'tr.step[data-step="01-implementer-exec-c1"]')
    screenshot(dash.browser, dash.shots, "dashboard-candidates.png")


class _Attacker(BaseHTTPRequestHandler):
    """A page on another origin that tries to stop a run on the dashboard the user has open."""

    target = ""

    def do_GET(self) -> None:
        page = f"""<!doctype html><title>cat pictures</title><body>
<form id="f" method="POST" action="{self.target}" target="sink"><input name="now" value="1"></form>
<iframe name="sink"></iframe>
<script>
fetch("{self.target}", {{method: "POST", mode: "no-cors", body: '{{"now": true}}'}})
  .catch(() => null)
  .finally(() => {{ document.getElementById("f").submit(); setTimeout(() => document.title = "sent", 500); }});
</script></body>"""
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(page.encode())

    def log_message(self, *args: object) -> None:
        """Quiet."""


def test_a_request_without_the_token_or_from_another_origin_is_refused(project, agent_script, marks, runners, dash):
    browser, serve = dash.browser, dash.serve
    runners.start("run", "wait", "--implementer", agent_script(released(marks)), "--no-review", "--max-iters", "3")
    wait_for((marks / "started-1").exists, "the run to start")
    rundir = project.runs()[-1]
    server = serve(project.path)
    stop_url = f"{server.url}api/runs/0/{rundir.name}/stop"
    browser.get(f"{server.url}runs/0/{rundir.name}")
    token = page_token(browser)
    assert len(token) >= 24

    # A page from another origin, opened in the same browser, fires a fetch and a form post at Stop.
    _Attacker.target = stop_url
    evil = ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        browser.get(f"http://127.0.0.1:{evil.server_address[1]}/")
        until(browser, lambda d: d.title == "sent", "the other page to send its requests")
    finally:
        evil.shutdown()
    # Without the token, with a wrong one, from another origin, or under another host name: refused.
    assert post(stop_url, token=None, origin=None)[0] == 403
    assert post(stop_url, token="guess", origin=None)[0] == 403
    code, answer = post(stop_url, token=token, origin="http://evil.example")
    assert code == 403
    assert "evil.example" in answer["error"]
    assert post(stop_url, token=token, origin=None, host="evil.example:80")[0] == 421
    argv = [sys.executable, "-m", "loope", "status", rundir.name, "--json"]
    status = json.loads(subprocess.run(argv, cwd=project.path, capture_output=True, text=True, check=True).stdout)
    assert (status["loop"]["status"], status["loop"]["stop_requested"]) == ("running", False)
    # The dashboard's own page, with its token: accepted.
    code, answer = post(stop_url, token=token, origin=server.origin)
    assert (code, answer["requested"]) == (200, True)
    (marks / "go-1").touch()
    wait_for(lambda: finished(rundir), "the run to stop")
    assert json.loads((rundir / "run.json").read_text())["status"] == "stopped"


def test_serving_beyond_this_machine_needs_a_token(project, cli):
    result = cli("serve", "--host", "0.0.0.0", "--port", "0", cwd=project.path)
    assert result.exit_code == 2
    assert "pass --token T (or set LOOPE_SERVE_TOKEN)" in one_error_line(result.err)


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_step_files_come_in_pages_and_nothing_outside_the_run_is_served(project, agent_script, cli, serve):
    body = "print('x' * 150_000)"  # a result larger than one page
    cli("run", "big", "--implementer", agent_script(body), "--no-review", "--max-iters", "1", cwd=project.path)
    rundir = project.runs()[-1]
    server = serve(project.path)
    base = f"{server.url}api/runs/0/{rundir.name}"
    code, listing = get(f"{base}/steps/01-implementer-exec")
    assert code == 200
    assert json.loads(listing)["files"][:2] == ["prompt.md", "result.md"]
    text, offset = "", 0
    while offset is not None:
        code, page = get(f"{base}/steps/01-implementer-exec/result.md?offset={offset}")
        assert code == 200
        data = json.loads(page)
        assert len(data["text"].encode()) <= 64 * 1024
        text += data["text"]
        offset = data["next_offset"]
    assert text == (rundir / "agents" / "01-implementer-exec" / "result.md").read_text()
    (project.path / "secret.txt").write_text("not for the dashboard\n")
    for path in (
        f"{base}/steps/01-implementer-exec/..%2F..%2F..%2F..%2F..%2Fsecret.txt",
        f"{base}/steps/..%2F..%2F..%2F..%2F/secret.txt",
        f"{base}/steps/01-implementer-exec/spec.json",
        f"{server.url}api/runs/0/..%2F..%2F..%2F/diff",
        f"{server.url}api/runs/7/{rundir.name}",
        f"{server.url}static/..%2F..%2F..%2F..%2Fsecret.txt",
    ):
        code, answer = get(path)
        assert code == 404, path
        assert b"not for the dashboard" not in answer


def test_the_runs_page_lists_the_fleets_and_links_their_loops(tmp_path, agent_script, dash):
    from tests.integration.test_fleet import FIXER, write_fleet

    fleet_dir = tmp_path / "fleet"
    fleet_dir.mkdir()
    path = write_fleet(fleet_dir, agent_script(FIXER.replace("COST", "0.01")), {"one": 1, "two": 1})
    done = subprocess.run(
        [sys.executable, "-m", "loope", "fleet", str(path), "--plain"],
        cwd=fleet_dir,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    server = dash.serve(fleet_dir, "--project", str(fleet_dir / "repos" / "one"))
    code, body = get(f"{server.url}api/runs")
    assert code == 200
    (fleet,) = json.loads(body)["fleets"]
    assert (fleet["fleet_id"], fleet["status"], fleet["on"]) == ("0001-fleet", "converged", "this machine")
    one, two = fleet["loops"]
    assert one["url"] == f"/runs/1/{one['loop_id']}"  # its workdir is a project the dashboard shows
    assert two["url"] is None  # not shown here: no link to follow
    browser = dash.browser
    browser.get(server.url)
    until(browser, lambda d: d.find_elements("css selector", '#fleets tr[data-fleet="0001-fleet"]'), "the fleet")

    def follow_the_link(d) -> bool:  # type: ignore[no-untyped-def]  # found, read and clicked at once, again if redrawn
        link = d.find_element("css selector", '#fleets tr[data-task="one"] a')
        assert link.text == one["loop_id"]
        link.click()
        return True

    until(browser, follow_the_link, "the fleet's link to its loop")
    until(
        browser,
        lambda d: one["loop_id"] in d.title or d.find_elements("css selector", "body[data-run]"),
        "the run page",
    )
