"""The demo's implementer: an ``exec:`` agent that fixes calc.add in two attempts.

The first attempt is a plausible but wrong fix. Once the prompt carries the failing test that
proves it wrong (loope feeds it back), the second attempt writes the right one.
"""

import json
import pathlib
import sys

prompt = sys.stdin.read()
source = pathlib.Path("calc/__init__.py")


def event(**data: object) -> None:
    print(json.dumps(data), flush=True)


event(type="action", action="read", target=str(source))
text = source.read_text()
if "test_add_negative" in prompt:
    body, why = "return a + b", "the failing test shows negative numbers must add too"
else:
    body, why = "return abs(a) + abs(b)", "add must not subtract"
start = text.index("    return", text.index("def add"))
end = text.index("\n", start)
source.write_text(text[:start] + "    " + body + text[end:])
event(type="action", action="edit", target=str(source))
event(type="usage", input_tokens=len(prompt) // 4, output_tokens=40)
print(f"Changed add() to `{body}`: {why}.")
