"""No import circles: in the graph of rcubench's own modules (grimp's, as import-linter reads
it: every import statement, function-local ones and `if TYPE_CHECKING:` ones included), no
strongly connected component holds more than one module.

The layer contracts (tests/test_layers.py) keep the packages in order; a circle inside one
floor (mail importing the pages that import mail) is beyond them, and a function-local
import only hides it from the top of the file. Components come from Tarjan's algorithm.
"""

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("workers", "webapp", "engine", "stats", "benchmarks", "tests")


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """The strongly connected components of `graph` (node -> the nodes it points to), by
    Tarjan's algorithm, iterative (an import chain may be deeper than Python's stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(graph.get(root, ())))]
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(graph.get(succ, ()))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:  # every successor seen: node is done
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def import_circles(packages: Iterable[str]) -> list[str]:
    """Each circle among the modules of `packages` (importable from sys.path): its members
    and the imports that close it, with their lines."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    edges = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    circles = []
    for component in strongly_connected(edges):
        if len(component) < 2:
            continue
        imports = [
            f"  {detail['importer']} -> {detail['imported']} "
            f"(l.{detail['line_number']}: {detail['line_contents']})"
            for importer in sorted(component)
            for imported in sorted(edges[importer] & component)
            for detail in graph.get_import_details(importer=importer, imported=imported)
        ]
        circles.append(f"{', '.join(sorted(component))}:\n" + "\n".join(imports))
    return circles


def test_no_module_imports_itself_through_others(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    circles = import_circles(PACKAGES)
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_tarjan_finds_each_circle_and_leaves_the_rest_single():
    graph = {"a": ["b"], "b": ["c", "d"], "c": ["a"], "d": ["e"], "e": ["d", "f"], "f": []}
    found = sorted(sorted(c) for c in strongly_connected(graph))
    assert found == [["a", "b", "c"], ["d", "e"], ["f"]]
    deep = sys.getrecursionlimit() + 100  # a chain deeper than Python's stack allows
    chain = {f"m{i}": [f"m{(i + 1) % deep}"] for i in range(deep)}
    assert [len(c) for c in strongly_connected(chain)] == [deep]


def test_a_circle_closed_by_a_function_local_import_is_found(tmp_path, monkeypatch):
    package = tmp_path / "circle_scratch"
    (package / "mail").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mail" / "__init__.py").write_text("")
    (package / "pages.py").write_text("from circle_scratch.mail import messages\n")
    (package / "mail" / "messages.py").write_text(
        "def send():\n    from circle_scratch import pages\n\n    return pages\n"
    )
    (package / "summary.py").write_text("from circle_scratch import pages\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    circles = import_circles(["circle_scratch"])
    assert len(circles) == 1
    assert circles[0].startswith("circle_scratch.mail.messages, circle_scratch.pages:\n")
    assert "circle_scratch.mail.messages -> circle_scratch.pages (l.2: " in circles[0]
