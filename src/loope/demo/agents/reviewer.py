"""The demo's reviewer: an ``exec:`` agent that reads the diff in its prompt and gives a verdict."""

import json
import sys

prompt = sys.stdin.read()
print(json.dumps({"type": "action", "action": "read", "target": "calc/__init__.py"}), flush=True)
if "+    return a + b" in prompt:
    print("add() now returns a + b, which is what its docstring promises.")
    print("VERDICT: PASS")
else:
    print("add() still does not compute a plain sum.")
    print("VERDICT: BLOCK")
