"""Estimated USD for agents whose CLI reports tokens but not cost.

Prices are USD per million tokens (input, output), matched by the longest model-name fragment.
loope.toml overrides or extends them: ``[prices] "my-model" = [1.0, 4.0]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PRICES: dict[str, tuple[float, float]] = {
    "opus": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4-0": (15.0, 75.0),
    "sonnet": (3.0, 15.0),
    "haiku": (1.0, 5.0),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "codex": (1.25, 10.0),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4o": (2.5, 10.0),
    "o3": (2.0, 8.0),
    "o4-mini": (1.1, 4.4),
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.3, 2.5),
    "gemini-3-pro": (2.0, 12.0),
    "gemini": (1.25, 10.0),
    "qwen3-coder": (1.0, 5.0),
    "qwen": (1.0, 5.0),
}


def price_for(model: str, overrides: Mapping[str, Any] | None = None) -> tuple[float, float] | None:
    """(input, output) USD per million tokens for ``model``, or None when it is unknown."""
    table: dict[str, tuple[float, float]] = dict(PRICES)
    for key, value in (overrides or {}).items():
        table[str(key).lower()] = (float(value[0]), float(value[1]))
    name = model.lower()
    matches = [key for key in table if key in name]
    if not matches:
        return None
    return table[max(matches, key=len)]


def estimate(
    model: str | None, input_tokens: int, output_tokens: int, options: Mapping[str, Any] | None = None
) -> float | None:
    """Estimated USD for the tokens, or None when there were none or the model's price is unknown."""
    if not model or not (input_tokens or output_tokens):
        return None
    price = price_for(model, (options or {}).get("prices"))
    if price is None:
        return None
    return round((input_tokens * price[0] + output_tokens * price[1]) / 1_000_000, 6)
