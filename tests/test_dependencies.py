"""What nightowl needs installed, declared: every library the product imports is a runtime
dependency, every runtime range stops before the next major version, and constraints.txt
pins versions inside those ranges that CI installs with."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "agent", "adapters")


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def runtime() -> dict[str, Requirement]:
    requirements = map(Requirement, project()["dependencies"])
    return {canonicalize_name(r.name): r for r in requirements}


def pins() -> dict[str, str]:
    found = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            found[canonicalize_name(name)] = version
    return found


def imported_libraries() -> dict[str, set[str]]:
    """Top-level modules the product imports that are neither its own nor the standard
    library's, with the files importing them."""
    own = {*PACKAGES, "nightowl_errors"}
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in own and top not in sys.stdlib_module_names:
                        found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_library_the_product_imports_is_a_runtime_dependency() -> None:
    distributions = importlib.metadata.packages_distributions()
    declared = set(runtime())
    undeclared = {
        module: sorted(files)
        for module, files in imported_libraries().items()
        if not {canonicalize_name(d) for d in distributions.get(module, [module])} & declared
    }
    assert not undeclared, f"imported but not in [project] dependencies: {undeclared}"


def test_every_runtime_range_stops_before_the_next_major_version() -> None:
    unbounded = [
        str(r) for r in runtime().values() if not any(s.operator == "<" for s in r.specifier)
    ]
    assert not unbounded, unbounded


def test_constraints_pin_every_requirement_inside_its_range() -> None:
    pinned = pins()
    requirements = [
        *runtime().values(),
        *map(Requirement, project()["optional-dependencies"]["test"]),
    ]
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"constraints.txt does not pin {requirement.name}"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"constraints.txt pins {name}=={pinned[name]}, outside {requirement}"
        )
    assert "nightowl" not in pinned  # the project itself is installed from the checkout


def test_ci_installs_with_the_constraints() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -c constraints.txt -e '.[test]' && pytest" in ci
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e '.[test]' && pytest" in readme  # a user's command stays plain
