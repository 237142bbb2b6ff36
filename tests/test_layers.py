"""The layering, read from the source (AST): ``format`` (pure) -> ``storage`` -> ``engine`` -> ``ops`` ->
the facade (``archive``) -> ``integrations`` -> ``analysis`` -> ``cli``; a package imports only its own
modules and those below it (no cycle). The integrations and the offline reader are on the archive's
public API alone: no import of ``engine`` or ``ops``, no ``archive.engine`` reach (issue 21)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ckpt_archive"
LAYERS = {"format": 0, "storage": 1, "engine": 2, "ops": 3, "archive": 4, "integrations": 5, "analysis": 6, "cli": 7}
PUBLIC_ONLY = ("integrations", "analysis")
"""Packages that see the archive only through ``ArchiveCheckpointer`` (and the pure ``format``)."""
INTERNALS = ("engine", "ops")


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a module, lazy ones (inside functions) included."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = list(rel if path.name == "__init__.py" else rel[:-1])
    if path.name == "__init__.py":
        package = package[:-1]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.append((node.lineno, module))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
    return out


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "ckpt_archive" and parts[1] in LAYERS else None


def _modules(package: str) -> list[Path]:
    return sorted((PACKAGE / package).rglob("*.py"))


def test_each_package_imports_only_the_layers_below() -> None:
    wrong = []
    for package, rank in LAYERS.items():
        for path in _modules(package):
            for line, module in _imports(path):
                layer = _layer(module)
                if layer is not None and layer != package and LAYERS[layer] >= rank:
                    wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports {module}")
    assert not wrong, wrong


def test_integrations_and_the_offline_reader_use_the_public_api_only() -> None:
    """No import of the engine or the operations, and no ``.engine`` attribute (the facade's engine):
    what they need is a method of ``ArchiveCheckpointer``."""
    wrong = []
    for package in PUBLIC_ONLY:
        for path in _modules(package):
            where = path.relative_to(PACKAGE)
            wrong += [f"{where}:{line} imports {m}" for line, m in _imports(path) if _layer(m) in INTERNALS]
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr == "engine":
                    wrong.append(f"{where}:{node.lineno} reads .engine")
    assert not wrong, wrong


def test_the_scan_sees_a_reach() -> None:
    """The checks read what they claim to (a module that reaches in is found)."""
    source = "from ...ops.gc import check_grace\nfrom ...engine.contents import Contents\nx = archive.engine\n"
    tree = ast.parse(source)
    modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert modules == ["ops.gc", "engine.contents"]
    assert any(isinstance(n, ast.Attribute) and n.attr == "engine" for n in ast.walk(tree))
    found = _imports(PACKAGE / "integrations" / "langgraph" / "writes.py")
    assert ("ckpt_archive.format.layout" in {m for _, m in found}) or any(
        m.startswith("ckpt_archive.format") for _, m in found
    )


WITHOUT_LANGGRAPH = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("langgraph", "langchain_core"):
            raise ImportError(f"{name} is not installed")
        return None
sys.meta_path.insert(0, Block())
import tempfile
import ckpt_archive as ca
import ckpt_archive.analysis
from ckpt_archive._sync import run_sync
from ckpt_archive.format import langgraph as L
url = tempfile.mkdtemp() + "/a"
archive = ca.open_archive(url)
marks = [("a", None, ["m"]), ("b", "a", []), ("c", "b", [])]
for step, (lg, parent, values) in enumerate(marks):
    channels = {"m": {"json": ["seed"]}} if values else {}
    state = {"channels": channels, "writes": {parent: {"w": ["task", "", [[0, "m", "hi-" + lg]]]}} if parent else {}}
    meta = {"ckpt_archive.langgraph": {"id": lg, "parent": parent, "values": values}}
    archive.save(ca.Checkpoint(thread_id="t", state=state, step=step, metadata=meta))
m = run_sync(archive.amanifest("t"))[0]
lineage = L.Lineage(m)
walk = L.plan(lineage, "c", ["m"])
parts = run_sync(archive.aparts("t", walk.parts(), m))
states = {rid: L.partial(got) for rid, got in parts.items()}
h = L.scan(walk, ["m"], states, {x: lineage.carried(x, states) for x in walk.lg_ids})["m"]
assert h.seed == {"json": ["seed"]} and [w[2] for w in h.writes] == ["hi-b", "hi-c"], h
assert not any(n.split(".")[0] in ("langgraph", "langchain_core") for n in sys.modules)
print("ok")
"""


def test_the_walk_runs_where_langgraph_is_not_installed() -> None:
    """The one ``DeltaChannel`` walk (``format.langgraph``) and the offline reader import without the
    ``langgraph`` extra (analysis reads archives where it is not installed): in a process that cannot
    import ``langgraph`` or ``langchain_core``, a thread's walk plans, reads through the facade and scans."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_LANGGRAPH], capture_output=True, text=True, cwd=PACKAGE.parent, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
