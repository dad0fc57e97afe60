"""The README's Python example runs as printed."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import zimp

DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                    "readme_demo.py")


def test_readme_demo_prints_every_message_per_subscriber() -> None:
    zimp.unlink("pydemo", missing_ok=True)
    package = os.path.dirname(os.path.dirname(os.path.abspath(zimp.__file__)))
    env = {**os.environ, "PYTHONPATH": package + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, DEMO], capture_output=True, text=True,
                         timeout=60, check=True, env=env).stdout
    want = sorted(f"subscriber {k}: message {i}" for k in range(2) for i in range(3))
    # Two processes print to one pipe: a line's newline may land after the other's text.
    assert sorted(re.findall(r"subscriber \d: message \d", out)) == want
    assert not os.path.exists("/dev/shm/zimp.pydemo")


def test_readme_shows_the_file() -> None:
    """The code block under the README's "In Python" heading is this file."""
    readme = os.path.join(os.path.dirname(DEMO), "..", "..", "README.md")
    with open(readme) as f:
        text = f.read()
    section = text.split("## In Python", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    with open(DEMO) as f:
        assert block == f.read()
