"""The package's layout holds to docs/design: one direction, no cycles, no pipeline
module at the root, tests mirroring src, files of a readable size.

Imports are read with ``ast`` (every import statement, also those inside functions),
so a lazy import counts like any other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "storbench"
ROOT_MODULES = {"__init__", "__main__", "errors"}  # not stages of the pipeline
PACKAGES = {"result", "workload", "analysis", "render", "execute", "target", "store",
            "pipeline", "cli"}
# Who may import whom (besides errors and the package's own modules): one direction.
ALLOWED = {
    "result": set(),
    "workload": set(),
    "analysis": {"result", "workload"},
    "render": {"analysis", "result", "workload"},
    "execute": {"result"},
    "target": {"execute", "workload", "result"},
    "store": {"result"},
    "pipeline": {"analysis", "execute", "result", "store", "target", "workload"},
    "cli": PACKAGES - {"cli"},
}


def unit_of(module: str) -> str | None:
    """storbench.x.y -> 'x' (a package), storbench.errors -> 'errors'; None if foreign."""
    parts = module.split(".")
    if parts[0] != "storbench":
        return None
    if len(parts) == 1 or parts[1].startswith("__"):  # storbench.__version__
        return "__init__"
    return parts[1]


def imports(path: Path, src: Path) -> set[str]:
    """Every storbench module ``path`` (under ``src``) imports, absolute names."""
    tree = ast.parse(path.read_text(), str(path))
    package = list(path.relative_to(src.parent).parts[:-1])  # the module's package
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join([*base, *([node.module] if node.module else [])])
            else:
                mod = node.module or ""
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}
    return {m for m in found if m.startswith("storbench")}


def package_graph(src: Path = SRC) -> dict[str, set[str]]:
    """unit -> the units it imports (a unit: a subpackage, or a module at the root)."""
    graph: dict[str, set[str]] = {}
    for path in src.rglob("*.py"):
        rel = path.relative_to(src)
        unit = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        deps = {u for m in imports(path, src) if (u := unit_of(m)) not in (None, unit)}
        graph.setdefault(unit, set()).update(deps)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt):], nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_no_cycles_between_packages():
    assert cycles(package_graph()) == []


def module_of(path: Path, src: Path = SRC) -> str:
    return ".".join(("storbench", *path.relative_to(src).with_suffix("").parts)).removesuffix(
        ".__init__")


def is_module(name: str, src: Path = SRC) -> bool:
    where = src.parent.joinpath(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def file_graph(src: Path = SRC) -> dict[str, set[str]]:
    """module -> the modules (files) it imports. ``from pkg import sub`` names the module
    pkg.sub, ``from mod import name`` the module mod; lazy imports count too."""
    graph: dict[str, set[str]] = {}
    for path in src.rglob("*.py"):
        me = module_of(path, src)
        deps = set()
        for name in imports(path, src):
            parts = name.split(".")
            while parts and not is_module(".".join(parts), src):
                parts.pop()
            found = ".".join(parts)
            # "from pkg import sub" yields pkg and pkg.sub: the package itself only when
            # something else of it is named
            if found and found != me:
                deps.add(found)
        graph[me] = {d for d in deps if not any(o.startswith(d + ".") for o in deps)}
    return graph


def test_no_cycles_between_files():
    """Not even through a lazy import: a file and what it imports form a tree."""
    assert cycles(file_graph()) == []


def test_this_test_catches_a_file_cycle_inside_a_package(tmp_path):
    pkg = tmp_path / "storbench" / "execute"
    pkg.mkdir(parents=True)
    (tmp_path / "storbench" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "fsops.py").write_text("from storbench.execute.workdir import MARKER\n")
    (pkg / "workdir.py").write_text("def f():\n    from storbench.execute import fsops\n")
    assert cycles(file_graph(tmp_path / "storbench")) == [
        ["storbench.execute.fsops", "storbench.execute.workdir", "storbench.execute.fsops"]]


def data_key_tests(path: Path) -> list[int]:
    """Lines where ``path`` reads a run's ``data`` by key (x.data[...], x.data.get(...))."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "data":
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("get", "keys") \
                and isinstance(node.func.value, ast.Attribute) \
                and node.func.value.attr == "data":
            found.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(
                isinstance(op, ast.In | ast.NotIn) for op in node.ops) and any(
                isinstance(c, ast.Attribute) and c.attr == "data" for c in node.comparators):
            found.append(node.lineno)  # "curve" in run.data
    return found


def test_run_data_is_read_through_its_sections_only():
    """A kind's section is typed in result/sections.py and asked for there (CURVE.of(run)),
    never tested by key across the code."""
    offenders = {str(p.relative_to(SRC)): lines for p in SRC.rglob("*.py")
                 if p != SRC / "result" / "sections.py" and (lines := data_key_tests(p))}
    assert offenders == {}


def test_each_package_imports_only_what_lies_below_it():
    graph = package_graph()
    for unit, deps in graph.items():
        if unit not in PACKAGES:
            continue
        others = deps - {"errors", "__init__"}
        assert others <= ALLOWED[unit], f"{unit} imports {sorted(others - ALLOWED[unit])}"


# The kinds that drive a target's own engine (Kubernetes objects, not fio's files): they
# use the classes that know it, and say so here.
OWN_ENGINE = {
    "pipeline/kinds/lifecycle.py": "creates volumes, snapshots and clones of a class",
    "pipeline/kinds/failover.py": "moves a pod and its volume between nodes",
}


def test_the_pipeline_reaches_targets_through_the_contract():
    """The loop and the kinds know a target by target/base.py's contract (Target,
    PutsFiles, Restricting, ...), never by its class: no branch for a block device
    in a kind (the replay kind had one: isinstance(target, BlockTarget))."""
    crossing = {}
    for path in (SRC / "pipeline").rglob("*.py"):
        reached = {m for m in imports(path, SRC) if m.startswith("storbench.target.")
                   and not m.startswith("storbench.target.base")}
        if reached:
            crossing[str(path.relative_to(SRC))] = sorted(reached)
    assert set(crossing) - set(OWN_ENGINE) == set(), crossing
    assert set(OWN_ENGINE) <= set(crossing), "an OWN_ENGINE entry no longer applies"


def test_analysis_and_render_import_neither_store_nor_execute():
    graph = package_graph()
    for unit in ("analysis", "render"):
        assert not graph[unit] & {"store", "execute", "target", "pipeline", "cli"}, unit
    assert "target" not in graph["execute"]


def test_no_pipeline_module_at_the_package_root():
    at_root = {p.stem for p in SRC.glob("*.py")}
    assert at_root <= ROOT_MODULES, sorted(at_root - ROOT_MODULES)


def test_tests_mirror_src():
    """Every test file sits in a folder that exists in src (or at tests/ for the whole)."""
    for path in (ROOT / "tests").rglob("test_*.py"):
        rel = path.relative_to(ROOT / "tests").parent
        assert rel == Path(".") or (SRC / rel).is_dir(), path


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_files_stay_readable(path):
    assert len(path.read_text().splitlines()) <= 420, f"{path} is over ~400 lines: split it"


def test_this_test_catches_the_old_circle(tmp_path):
    """The wave-1 layout: runner imported hosts and kuberun, which imported runner."""
    pkg = tmp_path / "storbench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "runner.py").write_text("def f():\n    from storbench.hosts import g\n")
    (pkg / "hosts.py").write_text("from storbench.runner import f\n")
    assert cycles(package_graph(pkg)) == [["hosts", "runner", "hosts"]]


def test_the_cli_loads_no_heavy_library_it_does_not_need():
    """The Kubernetes client, yaml and the PNG renderer cost time at start-up: only the
    commands that use them import them."""
    import subprocess
    import sys

    code = ("import sys, storbench.cli; print(sorted({m.split('.')[0] for m in sys.modules"
            " if m.split('.')[0] in ('kubernetes', 'resvg_py', 'yaml', 'urllib3')}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def environment_reads(path: Path) -> list[int]:
    """Lines where ``path`` reads a stored environment by key, or takes one as a dict."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Subscript | ast.Call):
            target = node.value if isinstance(node, ast.Subscript) else node.func
            if isinstance(node, ast.Call) and isinstance(target, ast.Attribute) \
                    and target.attr == "get":
                target = target.value
            if isinstance(target, ast.Attribute) and target.attr == "environment":
                found.append(node.lineno)
        elif isinstance(node, ast.arg) and node.arg in ("env", "environment"):
            found.append(node.lineno)
    return found


def test_analysis_reads_a_target_through_its_typed_facts():
    """Warnings and notes decide by TargetFacts (result/facts.py), never by the keys of a
    stored environment (``"kubernetes" in env``)."""
    offenders = {str(p.relative_to(SRC)): lines for p in (SRC / "analysis").rglob("*.py")
                 if (lines := environment_reads(p))}
    assert offenders == {}


# options of the measuring commands declared apart on purpose: a different thing under the
# same name, said in each command's help
APART = {
    "--capacity": "run: the PVC's size, default from the suite; lifecycle/failover: each"
                  " PVC's, 1Gi",
    "--timeout": "run/curve: the whole run; lifecycle/failover: per pod",
    "--rate": "run: the etcd suite's open-loop write rate, none by default; failover: the"
              " writes a second around the pause, 100",
    "--storage-class": "run/curve: optional (or TARGET); lifecycle: required, repeatable;"
                       " failover: one class",
}


def test_the_measuring_commands_declare_each_shared_option_once():
    """`run`, `curve`, `k8s lifecycle` and `k8s failover` share their tail
    (cli/targets.target_options, cli/measuring.measuring_options, the cluster options):
    an option two of them take is the same declaration (same help, type, default), so it
    is written once; APART names the few that are different things."""
    import click

    from storbench.cli import cli

    ctx = click.Context(cli)

    def command(*names: str) -> click.Command:
        group: click.Command | None = cli
        for name in names:
            assert isinstance(group, click.Group)
            group = group.get_command(ctx, name)
        assert group is not None
        return group

    commands = {" ".join(n): command(*n) for n in (("run",), ("curve",), ("k8s", "lifecycle"),
                                                    ("k8s", "failover"))}
    seen: dict[str, tuple[str, object]] = {}
    shared = set()
    for name, command in commands.items():
        for param in command.params:
            what = (getattr(param, "help", None), param.type.to_info_dict(), param.default,
                    param.multiple)
            for opt in param.opts:
                if opt in seen and opt not in APART:
                    shared.add(opt)
                    assert seen[opt][1] == what, (
                        f"{opt} of {name} is declared apart from {seen[opt][0]}'s")
                seen.setdefault(opt, (name, what))
    # the tail really is shared: a test that compares nothing would pass anything
    assert {"--size", "--destructive", "--hosts", "--kubeconfig", "--namespace",
            "--image", "--access-mode", "--assert", "--json", "--db", "--label"} <= shared


# Where a kind's section may be named: its definition, the run record (which of a rounds
# run's repeats are its tests' figures), what runs it (pipeline/kinds) and its view
# (analysis/views): everything else finds it through the views' registry.
# (pipeline/explained.py: the section --explain writes beside any kind's)
KIND_HOMES = ("result/sections.py", "result/record.py", "analysis/views/", "pipeline/kinds/",
              "pipeline/explained.py")


def kind_sections() -> set[str]:
    """The names result/sections.py gives the kinds' sections (those with a view)."""
    from storbench.analysis.views import VIEWS
    from storbench.result import sections

    mine = {id(v.section) for v in VIEWS.values()}
    return {name for name, value in vars(sections).items() if id(value) in mine}


def naming_kinds(path: Path, names: set[str]) -> list[int]:
    """Lines where ``path`` names a kind's section: imports it from result.sections, or
    reads it as ``sections.NAME``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("result.sections") \
                and any(a.name in names for a in node.names):
            found.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in names \
                and isinstance(node.value, ast.Name) and node.value.id == "sections":
            found.append(node.lineno)
    return found


def kinds_named_outside(src: Path, names: set[str]) -> dict[str, list[int]]:
    return {rel: lines for p in src.rglob("*.py")
            if not (rel := str(p.relative_to(src))).startswith(KIND_HOMES)
            and (lines := naming_kinds(p, names))}


def test_no_module_outside_the_registry_names_a_kind():
    """Renderers, commands and analysis loop over analysis/views.VIEWS; a kind's own
    section is named only where it is made and where its view is (render/terminal.py
    once asked CURVE, APP and REPLAY in turn, and `compare --json` had no replay)."""
    names = kind_sections()
    assert {"CURVE", "APP", "REPLAY", "ROUNDS", "LIFECYCLE", "FAILOVER"} <= names
    assert kinds_named_outside(SRC, names) == {}


def test_this_test_catches_a_renderer_that_names_a_kind(tmp_path):
    render = tmp_path / "render"
    render.mkdir()
    (render / "terminal.py").write_text(
        "from storbench.result import sections\n"
        "def f(run):\n    return sections.CURVE.of(run)\n")
    (render / "report.py").write_text("from storbench.result.sections import APP, PHASES\n")
    assert kinds_named_outside(tmp_path, {"CURVE", "APP"}) == {
        "render/terminal.py": [3], "render/report.py": [1]}
