"""The import graph of the whole project, drawn from the code (ast): no cycle, and no module over
~500 lines without a reason written down here (test modules, lists of cases, are not counted).

Every `import` and `from ... import` counts, at module level or inside a function (a lazy import
still ties two modules together); only imports under `if TYPE_CHECKING:` do not (they never run).
`from a.b import c` is an edge to the module `a.b.c` when that is a module of ours, else to `a.b`.
Importing a submodule runs its package's `__init__` too, but that is not drawn as an edge: a
package whose `__init__` imports nothing (harness/sandbox/) cannot close a cycle that way.
The project's modules are the `.py` files of the folders setup.py maps onto `patchgym.<folder>`
(and `cli/` onto `patchgym`), the bundled suite's own libraries excepted (they are task sources).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"cli": "patchgym", "env": "patchgym.env", "tasks": "patchgym.tasks", "scrubber": "patchgym.scrubber",
           "harness": "patchgym.harness", "rl": "patchgym.rl", "tests": "patchgym.tests"}
MAX_LINES = 500
# module -> why it may stay over MAX_LINES (each a cohesive single job; splitting would scatter it)
LONG_MODULES_ALLOWED = {
    "patchgym.harness.equality_probe": "the equality probe (~600 lines), copied into the sandbox as one module "
    "beside the reporters: the question, when it is asked, which `__eq__` is the patch's, the copies' honest "
    "matchers and the compile-time turn of the asserts share its tables (an edited file's unchanged defs are "
    "a module of their own, edited_defs)",
    "patchgym.harness.first_calls": "the forked children of the graded tests (~515 lines): the fork, what a child "
    "may not do, what it reads through descriptors of its own and when a fork tells nothing share one child's "
    "setup; copied into the sandbox as one module beside the reporters",
    "patchgym.harness.pytest_reporter": "runs inside the graded repository's interpreter as one file "
    "(copied into the sandbox and loaded by path): it cannot import helpers of ours there",
    "patchgym.rl.sampler.embedded": "EmbeddedSampler's serving loop (737 lines): the request state, the decode "
    "step and the scheduler share the decode thread's state; sampling, the caches and the emulation are "
    "already modules of their own",
    "patchgym.harness.audit_hook": "runs inside the graded repository's interpreter, copied into the sandbox "
    "as one module beside the reporters: the hook, its Guard and the checks the reporters share at load",
    "patchgym.harness.unittest_reporter": "the signed unittest runner (~540 lines): its result class, the provenance "
    "of skips and failures and main share one run's state; what it shares with the pytest reporter is in helper "
    "modules already (canaries, audit_hook, compiled_tests, test_globals)",
    "patchgym.harness.test_globals": "what a protected test module binds, checked at each test (~650 lines): the "
    "defs, imports, shadows and, since stop 42, the literal data of one parse of the module's source, judged in one "
    "pass over its names; copied into the sandbox as one module beside the reporters",
    "patchgym.harness.compiled_tests": "the grader's own compilation of the test files and the checks made "
    "with it (~525 lines): one class whose caches every check shares, copied into the sandbox as one module the "
    "reporters import before any repository code; which wrappers a test's source asks for (decorators, its "
    "class's metaclass) is judged against that same compilation",
    "patchgym.harness.contradictions": "the contradiction copies (~725 lines): a module docstring of ~70 lines "
    "holds the argument why an honest fix fails every copy, which each rule of the code below must keep true; "
    "the guarded copies (~130 lines) share its sites, changes and splicing and are planned by its `targets`",
    "patchgym.harness.canaries": "the canaries (~510 lines): copied into the sandbox as one module that the "
    "reporters import before any repository code (no package of its own there); planting them into a test module's "
    "source, naming them, and reading which tests of which file are graded",
    "patchgym.harness.sandbox.local": "LocalSandbox and its factory only (540 lines) after the split into "
    "mountplan/launch/pump/rlimits/cgroup_pool/fileaccess; what is left is the two classes' own methods",
}
# Cycles allowed, each with the reason and its fix (none today: the parsers' registry, the Docker
# engine helpers and the Modal class names each moved to a module of their own).
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    modules = {}
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            if "suite/libraries" in path.as_posix() or "fixtures_grading/repos" in path.as_posix():
                continue
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def _type_checking_only(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Import nodes, skipping the bodies of `if TYPE_CHECKING:` (their `else:` still runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules else base)
            for target in targets:
                while target and target not in modules:  # `import a.b.c` where c is a name: its module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_project_import_graph_has_no_cycle() -> None:
    graph = import_graph(project_modules())
    assert sum(len(edges) for edges in graph.values()) > 300  # the graph was really drawn
    assert "patchgym.harness.sandbox.base" in graph["patchgym.harness.sandbox.local"]
    found = {tuple(component) for component in cycles(graph)}
    new = sorted(found - set(KNOWN_CYCLES))
    assert not new, "import cycles:\n" + "\n".join(" <-> ".join(component) for component in new)
    # A listed cycle that is gone is not an error (its owner cut it): the entry is then just stale.


def test_no_module_over_500_lines_without_a_reason() -> None:
    modules = project_modules()
    long = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules.items()}
    # Test modules are lists of cases, long by nature: they are not counted.
    over = {name: count for name, count in long.items() if count > MAX_LINES and not name.startswith("patchgym.tests.")}
    unexplained = sorted(f"{name} ({over[name]} lines)" for name in over if name not in LONG_MODULES_ALLOWED)
    assert not unexplained, "modules over 500 lines with no reason in LONG_MODULES_ALLOWED:\n" + "\n".join(unexplained)
    assert set(LONG_MODULES_ALLOWED) <= set(modules), "LONG_MODULES_ALLOWED names a module that does not exist"


def test_the_checker_finds_a_planted_cycle_and_skips_type_checking(tmp_path: Path) -> None:
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "__init__.py").write_text("")
    (tmp_path / "env" / "a.py").write_text("def f():\n    from patchgym.env import b\n")
    (tmp_path / "env" / "b.py").write_text("from . import c\n")
    (tmp_path / "env" / "c.py").write_text("import patchgym.env.a.f\n")
    (tmp_path / "env" / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from patchgym.env import a\nelse:\n    import os\n"
    )
    (tmp_path / "env" / "e.py").write_text("from patchgym.env.d import name\n")
    for folder in set(FOLDERS) - {"env"}:
        (tmp_path / folder).mkdir()
    graph = import_graph(project_modules(tmp_path))
    assert graph["patchgym.env.a"] == {"patchgym.env.b"}  # lazy, inside a function
    assert graph["patchgym.env.b"] == {"patchgym.env.c"}  # relative
    assert graph["patchgym.env.c"] == {"patchgym.env.a"}  # `import a.f`: the module a
    assert graph["patchgym.env.d"] == set()  # TYPE_CHECKING only
    assert graph["patchgym.env.e"] == {"patchgym.env.d"}  # a name from d
    assert cycles(graph) == [["patchgym.env.a", "patchgym.env.b", "patchgym.env.c"]]
