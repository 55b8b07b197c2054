"""Dependencies point one way, and each outside system has one home.

The layers, bottom up (docs/design.md, "Where the code lives"):
``lineage/core`` (pure) < ``lineage/codec`` < ``lineage/store`` and
``lineage/storage`` < ``lineage/zk`` and ``lineage/manager`` < ``ingest`` and
``mirror`` (side by side: neither imports the other) < ``retention`` <
``cli`` and the composition at the top of ``segment_lineage``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

ROOT = REPO
PACKAGE = ROOT / "segment_lineage"
NS = "segment_lineage."
OUTSIDE = (
    "kazoo",
    "pyspark",
    "pyarrow",
    "apscheduler",
    "typer",
    "prometheus_client",
    "cachetools",
    "deltalake",
    "duckdb",
    "polars",
)

FEATURE_MAY = {"lineage.core", "lineage.manager", "lineage.storage", "lineage.config"}

# What each place may import of the project, besides itself.
MAY_IMPORT: dict[str, set[str]] = {
    "lineage": set(),
    "lineage.core": set(),
    "lineage.codec": {"lineage.core"},
    "lineage.store": {"lineage.core", "lineage.codec"},
    "lineage.storage": {"lineage.core", "lineage.codec", "lineage.config"},
    "lineage.zk": {"lineage.core", "lineage.codec", "lineage.store", "lineage.config"},
    "lineage.manager": {
        "lineage.core",
        "lineage.codec",
        "lineage.store",
        "lineage.storage",
        "lineage.config",
    },
    "lineage.config": {"lineage.core"},
    # Features go through the manager (the only door into the lineage): never
    # the store, its codec or ZooKeeper.
    "ingest": {*FEATURE_MAY, "ingest"},
    "mirror": {*FEATURE_MAY, "mirror"},
    "retention": {*FEATURE_MAY, "mirror", "retention"},
    # Helpers beside the packages: the sample data the demo and tutorial push.
    "flights": {"lineage.core"},
    "sample": {"lineage.core"},
}
# The top: the command line and the compositions (the demo, the public API,
# ``python -m`` and the command's first lines), which may import anything.
TOP = {"cli", "demo", "__init__", "__main__", "launch"}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:  # `from package import module` imports the module
                sub = f"{node.module}.{alias.name}"
                is_module = ROOT.joinpath(*sub.split(".")).with_suffix(".py").exists()
                out.add(sub if is_module or ROOT.joinpath(*sub.split(".")).is_dir() else node.module)
    return out


def place(path: Path) -> str:
    """The layer a source file belongs to, as a dotted path below the namespace."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[0] == "lineage" and len(parts) > 1 and parts[1] != "__init__":
        return f"lineage.{parts[1]}"
    return parts[0]


def within(module: str, places: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in places)


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_import_points_down_the_layers(path: Path) -> None:
    where = place(path)
    assert where in MAY_IMPORT or where in TOP, f"{path.relative_to(ROOT)} has no place in the layers"
    if where in TOP:
        return
    allowed = MAY_IMPORT[where] | {where}
    ours = {m.removeprefix(NS) for m in imports(path) if m.startswith(NS)}
    bad = {m for m in ours if not within(m, allowed)}
    assert not bad, f"{path.relative_to(ROOT)} ({where}) imports {sorted(bad)}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_imports_the_old_top_level_packages(path: Path) -> None:
    old = {m for m in imports(path) if m.split(".")[0] in ("lineage", "ingest", "retention")}
    assert not old, f"{path.relative_to(ROOT)} imports {old}: everything lives under segment_lineage"


@pytest.mark.parametrize("path", sorted((PACKAGE / "lineage" / "core").rglob("*.py")), ids=lambda p: p.name)
def test_the_pure_core_imports_no_outside_system(path: Path) -> None:
    found = imports(path)
    outside = {m for m in found if m.split(".")[0] in OUTSIDE}
    assert not outside, f"{path.name} imports {outside}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_cli_imports_typer(path: Path) -> None:
    if place(path) == "cli":
        return
    assert not {m for m in imports(path) if m.split(".")[0] == "typer"}, path


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_mirror_log_module_imports_deltalake(path: Path) -> None:
    if path == PACKAGE / "mirror" / "delta.py":
        return
    assert not {m for m in imports(path) if m.split(".")[0] == "deltalake"}, path


def test_the_places_are_what_the_layers_name() -> None:
    """A new folder or top-level module must be given its place in the layers before it holds code."""
    places = {place(p) for p in SOURCES}
    assert places <= set(MAY_IMPORT) | TOP, places - set(MAY_IMPORT) - TOP


REACH_THROUGH = re.compile(r"\b(?:manager|m)\.store\b")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_features_reach_the_store_only_through_the_manager(path: Path) -> None:
    """``manager.store`` is the lineage package's own: a feature asks the
    manager (its clock, holds, versions, history, owners, pins)."""
    if place(path).startswith("lineage"):
        return
    found = [
        f"{n}: {line.strip()}"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if REACH_THROUGH.search(line)
    ]
    assert not found, f"{path.relative_to(ROOT)} reaches through the manager: {found[:3]}"
