"""The public import surface: ``segment_lineage`` and docs/python-api.md.

The page's complete example is run here, in a fresh process against the test
ZooKeeper, and must print what the page says it prints.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import segment_lineage
from tests.helpers.paths import REPO

ROOT = REPO
PAGE = ROOT / "docs" / "python-api.md"
EXAMPLE = "## A complete example"


def example() -> tuple[str, list[str]]:
    """The page's runnable example and the lines it says the example prints."""
    text = PAGE.read_text()
    section = text.split(EXAMPLE, 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"^```python\n(.*?)^```$", section, re.DOTALL | re.MULTILINE)
    printed = re.findall(r"^```text\n(.*?)^```$", section, re.DOTALL | re.MULTILINE)
    assert len(code) == 1 and len(printed) == 1, "the example section holds one python and one text block"
    return code[0], printed[0].splitlines()


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter that imports this checkout's package."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=ROOT,
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.zk
def test_the_documented_example_runs_and_prints_what_the_page_says(zk_hosts: str, tmp_path: Path) -> None:
    code, expected = example()
    done = run_python(code, {"LINEAGE_ZK": zk_hosts, "LINEAGE_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected, done.stdout
    assert "embedded" not in done.stderr, "the example must use LINEAGE_ZK when it is set"


def test_the_example_uses_the_public_api_only() -> None:
    code, _ = example()
    tree = ast.parse(code)
    plain = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert not [name for name in plain if name.startswith("segment_lineage")], plain
    ours = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("segment_lineage")
    ]
    assert ours, "the example imports segment_lineage"
    for node in ours:
        assert node.module == "segment_lineage", ast.unparse(node)
        assert {alias.name for alias in node.names} <= set(segment_lineage.__all__), ast.unparse(node)


def test_the_readme_python_lines_use_the_public_api() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    assert blocks, "the README shows the Python API"
    for block in blocks:
        named = [n for n in ast.walk(ast.parse(block)) if isinstance(n, ast.ImportFrom | ast.Import)]
        assert named
        for node in named:
            assert isinstance(node, ast.ImportFrom) and node.module == "segment_lineage", ast.unparse(node)
            assert {alias.name for alias in node.names} <= set(segment_lineage.__all__), ast.unparse(node)
    assert "segment_lineage." not in text, "the README names no private module"


def test_every_public_name_resolves_to_what_its_home_defines() -> None:
    homes: dict[str, str] = vars(segment_lineage)["_HOMES"]
    assert sorted(homes) == sorted(segment_lineage.__all__)
    assert len(set(segment_lineage.__all__)) == len(segment_lineage.__all__)
    for name in segment_lineage.__all__:
        value = getattr(segment_lineage, name)
        assert value is getattr(importlib.import_module(homes[name]), name), name


def test_the_type_checker_is_told_the_same_names_and_homes() -> None:
    tree = ast.parse((ROOT / "segment_lineage" / "__init__.py").read_text())
    guard = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    )
    told = {
        alias.name: node.module
        for node in guard.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert told == vars(segment_lineage)["_HOMES"]


def test_the_public_names_are_listed_by_dir() -> None:
    assert set(segment_lineage.__all__) <= set(dir(segment_lineage))


def test_an_unknown_name_raises_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'no_such_name'"):
        _ = segment_lineage.no_such_name  # type: ignore[attr-defined]
    with pytest.raises(ImportError, match="no_such_name"):
        exec("from segment_lineage import no_such_name", {})


def test_every_error_exported_derives_from_the_one_root() -> None:
    errors = [getattr(segment_lineage, n) for n in segment_lineage.__all__ if n.endswith("Error")]
    assert errors
    assert all(issubclass(e, segment_lineage.LineageError) for e in errors)


def test_importing_the_package_loads_no_outside_system() -> None:
    done = run_python(
        "import sys, segment_lineage\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'pyarrow', 'kazoo'})\n"
        "ours = sorted(m for m in sys.modules if m.startswith('segment_lineage.'))\n"
        "print(heavy, ours)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] []"
