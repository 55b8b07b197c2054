"""Dependencies point one way, and each outside system has one home."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).glob("*.py"))


@pytest.mark.parametrize("path", modules("lineage"), ids=lambda p: p.name)
def test_lineage_imports_no_higher_package(path: Path) -> None:
    bad = {m for m in imports(path) if m.split(".")[0] in ("ingest", "retention", "segment_lineage")}
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", modules("ingest") + modules("retention"), ids=lambda p: p.name)
def test_ingest_and_retention_do_not_import_the_composition(path: Path) -> None:
    assert not {m for m in imports(path) if m.startswith("segment_lineage")}


PURE = ["model", "transitions", "visibility", "names", "periods", "codec", "manager", "store", "retry"]


@pytest.mark.parametrize("name", PURE)
def test_the_pure_core_imports_no_outside_system(name: str) -> None:
    found = imports(ROOT / "lineage" / f"{name}.py")
    outside = {m for m in found if m.split(".")[0] in ("kazoo", "pyspark", "pyarrow", "apscheduler", "typer")}
    assert not outside, f"{name} imports {outside}"
