"""The house rule "a function-local import says why on the line above it" (HOUSE.md), for
imports of rcubench's own packages (ruff's known-first-party, and relative imports).

A function-local import hides a dependency from the import contracts' readers and from the
top of the file; it is there for a reason (Django not set up yet, an engine the web process
must not load, a circle to break) and the reason must be written down, or the import moved
up. The reason is a comment on the line directly above the import, on the import itself, or
above a run of consecutive function-local imports that it covers. A bare pragma (`noqa`,
`type: ignore`, `fmt: skip`) is not a reason. Scanned: every .py file of the repository
outside hidden folders (.venv, .git), var/ and migrations.
"""

import ast
import io
import re
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FIRST_PARTY = frozenset(PYPROJECT["tool"]["ruff"]["lint"]["isort"]["known-first-party"])
SKIPPED_DIRS = {"migrations", "var", "__pycache__"}
# Tool directives, which say nothing about why.
PRAGMA = re.compile(
    r"noqa(:\s*[A-Z]+[0-9]+([,\s]+[A-Z]+[0-9]+)*)?|type:\s*ignore(\[[^\]]*\])?"
    r"|fmt:\s*(skip|off|on)|pragma:[^#]*|nosec"
)


def python_files(root: Path) -> list[Path]:
    return sorted(
        path
        for path in root.rglob("*.py")
        if not any(
            part.startswith(".") or part in SKIPPED_DIRS
            for part in path.relative_to(root).parts[:-1]
        )
    )


def _local_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement inside a function or method body (at any depth)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, in_function=False)
    return found


def _first_party(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in FIRST_PARTY
    return any(alias.name.split(".")[0] in FIRST_PARTY for alias in node.names)


def _says_why(comment: str | None) -> bool:
    return comment is not None and bool(re.search(r"[A-Za-z]", PRAGMA.sub("", comment[1:])))


def unexplained_local_imports(source: str) -> list[int]:
    """The lines of the function-local imports of first-party modules that say not why."""
    comments = {
        token.start[0]: token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    lines = source.splitlines()
    local = _local_imports(ast.parse(source))
    # Each line of a local import -> that import, to walk up a run of them.
    statement_at = {
        n: node for node in local for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }
    offending = []
    for node in filter(_first_party, local):
        own_lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        if any(_says_why(comments.get(n)) for n in own_lines):
            continue
        above = node.lineno - 1
        while above in statement_at and above not in comments:  # a run of local imports
            above = statement_at[above].lineno - 1
        alone = above >= 1 and lines[above - 1].lstrip().startswith("#")  # a comment line
        if not _says_why(comments.get(above) if alone else None):
            offending.append(node.lineno)
    return offending


def test_every_local_import_of_our_own_modules_says_why():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {path.read_text().splitlines()[line - 1].strip()}"
        for path in python_files(ROOT)
        for line in unexplained_local_imports(path.read_text())
    ]
    assert not offenders, (
        f"{len(offenders)} function-local imports without a reason on the line above "
        "(write why, or move the import to the top):\n" + "\n".join(offenders)
    )


SAMPLE = """\
from webapp import settings  # a module-level import needs no reason


def f():
    from webapp.trees import models

    # The run service loads the VM engine, which the web process must not.
    from webapp.comparisons import runs
    from webapp.comparisons import orchestrator

    from engine.vm import runner  # libvirt: only on a bench worker
    from django.db import connection
    from benchmarks import registry  # noqa: F401
    # Circular: the summary imports this module.

    from webapp.comparisons import summary


class Page:
    def render(self):
        from . import sections

        return sections


def g():
    def inner():
        import stats.verdicts

        return stats.verdicts

    return inner
"""


def test_the_guard_finds_each_silent_local_import_and_no_other():
    lines = SAMPLE.splitlines()
    flagged = [lines[n - 1].strip() for n in unexplained_local_imports(SAMPLE)]
    assert flagged == [
        "from webapp.trees import models",  # nothing above: the blank line and the def
        "from benchmarks import registry  # noqa: F401",  # a pragma is not a reason
        "from webapp.comparisons import summary",  # its reason is a blank line away
        "from . import sections",  # relative: our own
        "import stats.verdicts",  # in a nested function
    ]


def test_hidden_folders_var_and_migrations_are_not_scanned(tmp_path):
    for path in (".venv/lib/x.py", "var/y.py", "app/migrations/0001_initial.py", "app/views.py",
                 "app/tests/test_views.py", "manage.py"):  # fmt: skip
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    scanned = [path.relative_to(tmp_path).as_posix() for path in python_files(tmp_path)]
    assert scanned == ["app/tests/test_views.py", "app/views.py", "manage.py"]
