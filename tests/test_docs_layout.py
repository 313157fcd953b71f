"""The layout block of docs/architecture.md (the fenced block under "## Layout") stays true
to the tree: everything it names exists, and it names every top-level Python package and
every app of the Django project (webapp/).

The block's format: an entry is a line that starts with its name at column 0 (a top-level
folder or file) or at column 2 (inside the last top-level folder), then its role; a line
indented further continues the role above. A folder's name ends with "/". Plain folders and
files are checked only for existence: leaving one out is allowed, naming a missing one is
not.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
ENTRY = re.compile(r"^(?P<indent> {0,2})(?P<name>\S+)(?: +(?P<role>\S.*))?$")


def _layout_block() -> str:
    text = DOC.read_text()
    heading = re.search(r"^## Layout\n", text, re.M)
    assert heading, "docs/architecture.md has no '## Layout' heading"
    section = text[heading.end() :]
    following = re.search(r"^## ", section, re.M)
    section = section[: following.start()] if following else section
    block = re.search(r"^```\n(.*?)^```$", section, re.S | re.M)
    assert block, "the Layout section of docs/architecture.md has no fenced block"
    return block.group(1)


def _entries() -> dict[str, str]:
    """Each entry's path from the repository root, with its role."""
    entries: dict[str, str] = {}
    parent = ""
    for number, line in enumerate(_layout_block().splitlines(), 1):
        if not line.strip() or line.startswith("   "):
            continue  # a role's continuation
        match = ENTRY.match(line)
        assert match, f"Layout block, line {number}: not an entry: {line!r}"
        name, role = match["name"], match["role"] or ""
        if match["indent"]:
            assert parent, f"Layout block, line {number}: {name} is indented under no folder"
            path = parent + name
        else:
            path = name
            parent = name if name.endswith("/") else ""
        entries[path] = role
    return entries


def _is_package(folder: Path) -> bool:
    return folder.is_dir() and (folder / "__init__.py").is_file()


def test_layout_block_names_only_what_exists():
    absent = [
        path
        for path in _entries()
        if not ((ROOT / path).is_dir() if path.endswith("/") else (ROOT / path).is_file())
    ]
    assert not absent, (
        f"the Layout block of docs/architecture.md names what does not exist: {absent}"
    )


def test_every_entry_has_a_role():
    bare = [path for path, role in _entries().items() if not role]
    assert not bare, f"entries of the Layout block without a role: {bare}"


def test_layout_block_names_every_top_level_package():
    named = set(_entries())
    packages = sorted(f"{d.name}/" for d in ROOT.iterdir() if _is_package(d))
    missing = [p for p in packages if p not in named]
    assert not missing, (
        f"top-level packages missing from the Layout block of docs/architecture.md: {missing}"
    )


def test_layout_block_names_every_webapp_app_and_nothing_else_under_webapp():
    apps = {
        f"webapp/{d.name}/"
        for d in (ROOT / "webapp").iterdir()
        if d.is_dir() and ((d / "apps.py").is_file() or (d / "__init__.py").is_file())
    }
    named = {path for path in _entries() if path.startswith("webapp/") and path != "webapp/"}
    wrong = [f"missing {path}" for path in sorted(apps - named)]
    wrong += [f"not an app: {path}" for path in sorted(named - apps)]
    assert not wrong, (
        "the Layout block of docs/architecture.md must name each webapp/ app, and only those: "
        f"{wrong}"
    )
