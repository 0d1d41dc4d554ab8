"""The house rules, checked on the source: no import cycle (counting imports inside functions,
so no lazy import can hide one), no private name imported across modules, layers that only look
down, and every module importable without the native extension."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import shaper

SRC = Path(shaper.__file__).resolve().parent
ROOT = SRC.parent.parent

# what each layer may import from shaper (besides itself and the top-level helpers)
BASE = {"errors", "files", "arrays"}
ALLOWED = {
    "kernels": {"_native"},  # the only layer that touches the extension (one face per family)
    "crypto": {"kernels"},
    "circuits": {"kernels"},
    # a session owns the party's CSPRNG streams (nothing else of crypto); the launcher and the
    # parties file set where the party's kernel batches run (workers, executor)
    "net": {"crypto.prg", "kernels"},
    "protocols": {"kernels", "crypto", "circuits", "net"},
    "ml": {"kernels", "crypto", "protocols", "net"},
    "jobs": {"kernels", "crypto", "circuits", "protocols", "net", "ml"},
    "cli": {"kernels", "crypto", "circuits", "protocols", "net", "ml", "jobs"},
}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


MODULES = _modules()


def _imports(name: str, path: Path):
    """(target module, imported name or None, line) for every import anywhere in the file."""
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                yield target, alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno


def _edges():
    edges = {m: set() for m in MODULES}
    for mod, path in MODULES.items():
        for target, name, _ in _imports(mod, path):
            full = f"{target}.{name}" if name else target
            if full in MODULES:
                edges[mod].add(full)
            elif target in MODULES and not MODULES[target].name == "__init__.py":
                edges[mod].add(target)
            elif target in MODULES and name:  # a package's face: the edge goes to where the name lives
                edges[mod].add(target)
    return edges


def _cycles(edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def _is_own_package(mod: str, target: str) -> bool:
    """A package importing its own children (its face) is not a cycle worth reporting."""
    return target.startswith(mod + ".") and MODULES[mod].name == "__init__.py"


@pytest.mark.once
def test_no_import_cycles_even_through_function_level_imports():
    edges = _edges()
    for mod in edges:
        edges[mod] = {t for t in edges[mod] if not _is_own_package(mod, t) and not _is_own_package(t, mod)}
    assert _cycles(edges) == []


@pytest.mark.once
def test_no_private_names_imported_from_another_module():
    bad = []
    for mod, path in MODULES.items():
        for target, name, line in _imports(mod, path):
            if (name and name.startswith("_") and not name.startswith("__") and target != mod
                    and target.startswith("shaper") and name != "_native" and not target.endswith("_native")):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target}.{name}")
    assert bad == []


@pytest.mark.once
def test_layers_only_look_down():
    bad = []
    for mod, path in MODULES.items():
        parts = mod.split(".")
        if len(parts) < 3 or parts[1] not in ALLOWED:
            continue
        layer = parts[1]
        for target, name, line in _imports(mod, path):
            if target == "shaper" and name:  # `from ... import _native` / `from .. import kernels`
                target = f"shaper.{name}"
            tparts = target.split(".")
            if tparts[0] != "shaper" or len(tparts) < 2 or tparts[1] in BASE | {layer, "__version__"}:
                continue
            if tparts[1] not in ALLOWED[layer] and ".".join(tparts[1:3]) not in ALLOWED[layer]:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {layer} imports {target}")
    assert bad == []


@pytest.mark.once
def test_benchmarks_use_the_library_not_the_command_line():
    """Benchmarks call the library and, to time a whole job, :mod:`shaper.jobs` or the command
    itself (``shaper.cli.main(argv)``, as a user types it); never the parsers' internals."""
    bench = ROOT / "benchmarks"
    if not bench.is_dir():  # an installed copy without the repository around it
        return
    users = []
    for path in bench.rglob("*.py"):
        for target, name, line in _imports(f"benchmarks.{path.stem}", path):
            if (target == "shaper.cli" and name != "main") or target.startswith("shaper.cli.") or \
                    (target == "shaper" and name == "cli"):
                users.append(f"{path.name}:{line}")
    assert users == []


def test_every_module_imports_without_the_native_extension():
    names = [m.name for m in pkgutil.walk_packages(shaper.__path__, "shaper.") if m.name not in ("shaper._native", "shaper.__main__")]
    code = ("import sys; sys.modules['shaper._native'] = None\n"  # makes `import shaper._native` fail
            "import importlib\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "from shaper.kernels import bits, get_kernel, native\n"
            "assert not native.available() and not bits.native_gates()\n"
            "print(type(get_kernel()).__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() in ("GmpKernel", "ParallelKernel")
