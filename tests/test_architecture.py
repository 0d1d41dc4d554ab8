"""The map cannot go stale: docs/architecture.md's generated tables match the tree, and every
module, name or source path the README and the docs mention exists."""

import importlib
import importlib.util
import re
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))] if (ROOT / "docs").is_dir() else []
pytestmark = [pytest.mark.skipif(not DOCS, reason="an installed copy without the repository around it"),
              pytest.mark.once]  # kernel-independent: CI runs it in its first run only


def _generator():
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "docs" / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_architecture_tables_are_generated_from_the_tree(capsys):
    assert _generator().main(["--check"]) == 0, capsys.readouterr().out[-3000:]


def test_every_module_has_a_docstring():
    gen = _generator()
    table = gen.module_table()
    assert "(no docstring)" not in table, [ln for ln in table.splitlines() if "(no docstring)" in ln]
    assert "(no `//!` line)" not in gen.native_table()


def _resolves(dotted: str, modules: set[str]) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        if name in modules or name == "shaper._native":
            if cut == len(parts):
                return True
            try:
                obj = importlib.import_module(name)
            except ImportError:
                return True  # an optional dependency is missing here; the name itself exists
            for attr in parts[cut:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
    return False


def test_docs_name_only_modules_and_files_that_exist():
    modules = set(_generator().modules())
    bad = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for m in re.finditer(r"\bshaper(?:\.[A-Za-z_][A-Za-z0-9_]*)+", line):
                name = m.group(0).rstrip(".")
                if not _resolves(name, modules):
                    bad.append(f"{doc.name}:{n}: {name}")
            for m in re.finditer(r"\b((?:src|native|benchmarks|examples|tests|docs)/[\w./-]+\.(?:py|rs|md|toml|json))",
                                 line):
                if not (ROOT / m.group(1)).exists():
                    bad.append(f"{doc.name}:{n}: {m.group(1)}")
    assert bad == []
