"""Reading transient failures and usage limits from what the agent CLIs print."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from loope.agents.setback import from_text, parse_reset

NOW = datetime(2026, 12, 1, 8, 0, 0).astimezone().timestamp()


@pytest.mark.parametrize(
    "text",
    [
        "API Error: 529 Overloaded. This is a server-side issue, usually temporary",  # claude
        "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",  # claude
        "exceeded retry limit, last status: 429 Too Many Requests",  # codex
        "We’re currently experiencing high demand, which may cause temporary errors.",  # codex on a 500
        "stream disconnected before completion: error sending request",  # codex
        "[API Error: got status: 503 Service Unavailable]",  # gemini
        "Error: socket hang up",  # opencode, copilot (node)
        "request failed with status code 502 Bad Gateway",  # qwen
    ],
)
def test_transient_errors_as_the_clis_print_them(text):
    found = from_text(text, now=NOW)
    assert found is not None
    assert found.kind == "transient"


@pytest.mark.parametrize(
    "text",
    [
        "tests/test_429.py::test_status_500 FAILED",
        "error: unexpected argument '--foo' found",
        "not logged in · please run /login",
        "",
    ],
)
def test_other_failures_are_not_setbacks(text):
    assert from_text(text, now=NOW) is None


def test_codex_usage_limit_at_a_clock_time_waits_to_the_end_of_that_minute():
    text = "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) or try again at 10:50 AM."
    found = from_text(text, now=NOW)
    assert found is not None
    assert found.kind == "limit"
    expected = datetime(2026, 12, 1, 10, 51, 0).astimezone().timestamp()
    assert found.reset_at == expected


def test_a_clock_time_already_past_today_is_tomorrows():
    found = from_text("You've hit your usage limit. try again at 7:05 AM", now=NOW)
    assert found is not None
    assert found.reset_at is not None
    assert found.reset_at == (datetime(2026, 12, 1, 7, 6, 0) + timedelta(days=1)).astimezone().timestamp()


def test_a_dated_codex_reset():
    found = from_text("You've hit your usage limit. or try again at Dec 3rd, 2026 9:05 PM.", now=NOW)
    assert found is not None
    assert found.reset_at == datetime(2026, 12, 3, 21, 6, 0).astimezone().timestamp()


def test_a_limit_that_says_how_long():
    found = from_text("You've hit your usage limit, try again in 2 hours 5 minutes", now=NOW)
    assert found is not None
    assert found.kind == "limit"
    assert found.reset_at == NOW + 2 * 3600 + 5 * 60


def test_gemini_quota_with_its_reset():
    text = "You have exhausted your daily quota on this model. Your quota will reset after 3h2m5s."
    found = from_text(text, now=NOW)
    assert found is not None
    assert found.kind == "limit"
    assert found.reset_at == NOW + 3 * 3600 + 2 * 60 + 5


def test_a_rate_limit_with_retry_after_is_transient_with_a_floor():
    found = from_text("429 Too Many Requests; retry-after: 30", now=NOW)
    assert found is not None
    assert found.kind == "transient"
    assert found.retry_after == 30


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1796118327, 1796118327.0),
        (1796118327000, 1796118327.0),
        ("1796118327", 1796118327.0),
        ("2026-12-01T09:45:27Z", datetime.fromisoformat("2026-12-01T09:45:27+00:00").timestamp()),
        ("soon", None),
        (True, None),
        (None, None),
    ],
)
def test_reset_times(value, expected):
    assert parse_reset(value) == expected
