"""README starts with the two commands, and CI runs exactly the README's test command."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```(?:sh|bash|console)?\n(.*?)```", text, re.S)
    assert block, "README.md has no command block"
    assert text.index(block.group(0)) < text.index("\n## "), "commands must come first"
    lines = (line.split("#", 1)[0].strip() for line in block.group(1).splitlines())
    return [line for line in lines if line]


def test_readme_starts_with_main_job_and_test_commands():
    assert _readme_commands() == ["make demo", "make test"]


def test_ci_runs_exactly_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text()
    commands = [
        line.strip()
        for line in script.splitlines()
        if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert commands == [f"exec {_readme_commands()[1]}"]
