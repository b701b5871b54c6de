"""The house rules the repository claims, checked: types, layering, no import cycles,
file sizes (docs/design.md#house)."""

from __future__ import annotations

import ast
import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "agent", "adapters")
#: The layers each package may import (besides itself, the standard library, third-party
#: libraries and nightowl_errors).
ALLOWED = {"gateway": {"agent", "adapters"}, "agent": set(), "adapters": set()}
#: A file this long holds more than one idea. The rules above (arrows, rooms, no cycles)
#: are what keep the house in order; this only catches a file that grew without notice.
MAX_LINES = 600
#: The database drivers; only gateway/store may import them (docs/design.md#storage).
DRIVERS = {"sqlite3", "aiosqlite", "asyncpg", "psycopg", "psycopg2", "sqlalchemy"}
STORE = "gateway.store"
#: A string that opens like an SQL statement (keywords in capitals, as this code writes
#: them; prose such as "Select a model" is not matched).
SQL = re.compile(
    r"^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|CREATE\s+"
    r"(TABLE|INDEX|UNIQUE|VIRTUAL|TRIGGER|SCHEMA)\s|DROP\s+(TABLE|INDEX)\s|ALTER\s+TABLE\s"
    r"|PRAGMA\s|VACUUM\b|BEGIN(\s+IMMEDIATE)?\s*;?$|COMMIT\s*;?$|ROLLBACK\b|WITH\s+\w+\s*(\(|AS\s))"
)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules ``path`` imports (every import statement, wherever it is)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    return {t for t in targets if t in known}


def test_types_check_clean() -> None:
    if shutil.which("mypy") is None and not (Path(sys.executable).parent / "mypy").exists():
        pytest.fail("mypy is part of the test extra: pip install -e '.[test]'")
    result = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_arrows_point_from_the_gateway_to_the_agent_and_the_adapters_only() -> None:
    graph = modules()
    wrong = []
    for name, path in graph.items():
        layer = name.split(".")[0]
        for target in imports_of(path, name, set(graph)):
            other = target.split(".")[0]
            if other != layer and other not in ALLOWED[layer]:
                wrong.append(f"{name} imports {target}")
    assert not wrong, wrong


def test_no_import_cycles() -> None:
    graph = modules()
    edges = {name: imports_of(path, name, set(graph)) - {name} for name, path in graph.items()}
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    # A package's __init__ re-exporting its own modules is not a cycle between modules.
    real = [c for c in cycles if not any(a.startswith(b + ".") for a, b in itertools.pairwise(c))]
    assert not real, real


def test_no_product_file_over_600_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): count
        for path in modules().values()
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def test_lint_and_format_clean() -> None:
    """ruff's rules (pyproject.toml) and its formatting hold on every file, tests included."""
    for args in (["check", "."], ["format", "--check", "."]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_no_dataclass_writes_its_own_init() -> None:
    """``@dataclass`` on a class with its own ``__init__`` keeps the generated ``__eq__``
    and ``__repr__`` over no fields: any two instances compare equal."""
    wrong = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            decorated = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
            own_init = any(
                isinstance(item, ast.FunctionDef) and item.name == "__init__" for item in node.body
            )
            if decorated and own_init:
                wrong.append(f"{name}.{node.name}")
    assert not wrong, wrong


#: Modules of the gateway that may name a platform. The config and the CLI name them in
#: their keys and argument choices; logs.py quiets the platform libraries' own loggers,
#: which are named after them ("discord", "telegram").
NAMES_PLATFORMS = ("gateway.config", "gateway.ops", "gateway.logs")
PLATFORM_NAMES = frozenset({"telegram", "discord", "console"})


def platform_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string constant in ``source`` that is a platform's name."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.strip().lower() in PLATFORM_NAMES
    ]


def test_the_gateway_asks_adapters_what_a_platform_is_never_its_name() -> None:
    """docs/design.md#platform-traits: no ``if platform == "telegram"`` in the gateway."""
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for name, path in modules().items()
        if name.split(".")[0] == "gateway"
        and not any(name == kept or name.startswith(kept + ".") for kept in NAMES_PLATFORMS)
        for line, text in platform_literals(path.read_text())
    ]
    assert not found, found


def test_a_platform_named_in_a_comparison_a_set_or_a_call_is_found() -> None:
    source = (
        'def key(platform: str) -> str:\n    return "dm" if platform == "discord" else ""\n'
        "PLACES = {'Console', 'group'}\n"
        'NAME = "telegrams"\n'
        'print(f"telegram:{NAME}")\n'
    )
    assert sorted(platform_literals(source)) == [(2, "discord"), (3, "Console")]


def database_use(source: str, filename: str) -> list[str]:
    """The driver imports and SQL statement strings in ``source``: one line each."""
    found = []
    tree = ast.parse(source, filename)
    # An f-string is read from its first part; that part is not read again on its own.
    parts = {
        id(node.values[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr) and node.values
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            names = []
        found += [
            f"{filename}:{node.lineno} imports {n}" for n in names if n.split(".")[0] in DRIVERS
        ]
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            text = node.value
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                text = first.value
        if text is not None and SQL.match(text):
            found.append(f"{filename}:{node.lineno} holds SQL: {text.strip()[:60]!r}")
    return found


def test_only_the_store_speaks_sql_and_imports_database_drivers() -> None:
    wrong = []
    for name, path in modules().items():
        if name == STORE or name.startswith(STORE + "."):
            continue
        wrong += database_use(path.read_text(), str(path.relative_to(ROOT)))
    assert not wrong, wrong


def test_the_sql_detector_finds_what_it_looks_for() -> None:
    caught = database_use(
        "import asyncpg\n"
        "from sqlite3 import connect\n"
        "A = 'SELECT count(*) FROM sessions'\n"
        'B = f"DELETE FROM {table} WHERE id = ?"\n'
        "C = '  PRAGMA integrity_check'\n"
        "D = 'Select a model with /model'\n"
        "E = 'begin again'\n",
        "x.py",
    )
    assert [line.split(" ", 1)[0] for line in caught] == [
        "x.py:1",
        "x.py:2",
        "x.py:3",
        "x.py:4",
        "x.py:5",
    ]


#: The backends' own modules: outside the store, code types against the protocols and
#: gets its store from gateway/store/opening.py (docs/design.md#storage).
BACKEND_MODULES = ("gateway.store.sqlite", "gateway.store.postgres", "gateway.store.connection")


def test_outside_the_store_nothing_names_a_backend() -> None:
    graph = modules()
    wrong = []
    for name, path in graph.items():
        if name == STORE or name.startswith(STORE + "."):
            continue
        for target in imports_of(path, name, set(graph)):
            if any(target == m or target.startswith(m + ".") for m in BACKEND_MODULES):
                wrong.append(f"{name} imports {target}")
        source = path.read_text()
        wrong += [
            f"{name} names {cls}" for cls in ("SQLiteStore", "PostgresStore") if cls in source
        ]
    assert not wrong, wrong


def subpackage_edges(graph: dict[str, Path]) -> dict[tuple[str, str], list[str]]:
    """(from, to) between subpackages (``gateway.store``, ``agent.compression``...), with
    the imports behind each; a package's own top-level modules are its trunk, not a room."""

    def room(name: str) -> str | None:
        parts = name.split(".")
        if len(parts) > 2 or (len(parts) == 2 and graph[name].name == "__init__.py"):
            return ".".join(parts[:2])
        return None

    found: dict[tuple[str, str], list[str]] = {}
    for name, path in graph.items():
        here = room(name)
        for target in imports_of(path, name, set(graph)):
            there = room(target)
            if here and there and here != there:
                found.setdefault((here, there), []).append(f"{name} -> {target}")
    return found


def test_no_subpackages_form_a_cycle() -> None:
    """A room leans on another, never back, not even around a corner (a -> b -> c -> a):
    what rooms share lives in their package's trunk (``gateway/runtime.py``,
    ``gateway/platforms.py``)."""
    found = subpackage_edges(modules())
    reach: dict[str, set[str]] = {}
    for a, b in found:
        reach.setdefault(a, set()).add(b)
        reach.setdefault(b, set())
    changed = True
    while changed:  # the transitive closure of a graph of a few dozen rooms
        changed = False
        for targets in reach.values():
            wider = set().union(targets, *(reach[t] for t in targets))
            if wider != targets:
                targets |= wider
                changed = True
    both = sorted(
        {" <-> ".join(sorted((a, b))) for a in reach for b in reach[a] if a in reach[b] and a != b}
    )
    assert not both, {pair: found.get(tuple(pair.split(" <-> ")), [])[:2] for pair in both}


#: The one place each platform library's exceptions are caught and mapped to ours
#: (docs/design.md#errors); the catch-up reads history and maps through the same list.
ERROR_MAPS = {"adapters.telegram.calls", "adapters.discord_adapter.outbound"}
LIBRARY_ERRORS = re.compile(
    r"\b(telegram\.error|TelegramError|BadRequest|Forbidden|ChatMigrated|RetryAfter|TimedOut"
    r"|NetworkError|discord\.|HTTPException|NETWORK_ERRORS|DISCORD_ERRORS|aiohttp\.)"
)


def test_a_platform_library_error_is_caught_only_in_its_error_map() -> None:
    found = []
    for name, path in modules().items():
        if not name.startswith("adapters.") or name in ERROR_MAPS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                caught = ast.unparse(node.type)
                if LIBRARY_ERRORS.search(caught):
                    found.append(f"{name}:{node.lineno}: except {caught}")
    assert not found, found


DOC_LINK = re.compile(r"(docs/[a-z_]+\.md|ARCHITECTURE\.md)#([a-z0-9-]+)")


def anchors(path: Path) -> set[str]:
    """``<a id="...">`` anchors and GitHub's heading slugs of a Markdown file."""
    text = path.read_text()
    found = set(re.findall(r'<a id="([a-z0-9-]+)"', text))
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        found.add(re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-"))
    return found


def test_every_link_into_the_docs_lands_on_an_anchor() -> None:
    """Comments point at the repository's own docs (docs/design.md#...); a renamed or
    dropped anchor would leave them pointing nowhere."""
    known: dict[str, set[str]] = {}
    broken = []
    sources = [
        *modules().values(),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "bench").rglob("*.py"),
    ]
    for path in [*sources, *ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md")]:
        for document, anchor in DOC_LINK.findall(path.read_text()):
            target = ROOT / document
            if document not in known:
                known[document] = anchors(target) if target.exists() else set()
            if anchor not in known[document]:
                broken.append(f"{path.relative_to(ROOT)}: {document}#{anchor}")
    assert not broken, sorted(set(broken))
