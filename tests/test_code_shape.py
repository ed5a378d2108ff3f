"""The service's code keeps its shape: no module over 400 lines, no function over 60; the worker
runtime imports no app; an app meets another only through its public modules; no two modules
of one app share a name.

Lines that belong to string constants (docstrings, SQL text) do not count: a long query or a
well-explained module is not what these limits are about. Every other line does, blank ones too.
"""

import ast
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICE_APPS = ("pipeline_project", "jobs", "ingestion", "tracking")
SKIPPED_DIRS = {"migrations", "tests", "bench", "__pycache__"}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# The apps (innermost first: a module belongs to the first that contains it). The rest of the
# service is kits every app may use: the runtime (jobs.runtime) and pipeline_project's api, web, db.
APPS = (
    "jobs.processes",
    "jobs.schedules",
    "jobs.dbstates",
    "pipeline_project.core",
    "jobs.queue",
    "ingestion",
    "tracking",
)
RUNTIME = "jobs.runtime"
# What an app offers the others: its state changes, its reads, and the APIs apps write work
# against (``@task``, ``@namespace``, the latter two also at their documented older paths).
PUBLIC_MODULES = ("services", "selectors", "handlers", "registry", "namespaces")
# Module names Django looks for by name, which several packages of one app may need.
NAMES_DJANGO_ASKS_FOR = {"__init__", "apps", "admin", "models", "views", "urls", "serializers"}


def service_modules() -> list[Path]:
    return sorted(
        path
        for app in SERVICE_APPS
        for path in (ROOT / app).rglob("*.py")
        if not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts)
    )


def string_constant_lines(tree: ast.AST) -> set[int]:
    """The line numbers that belong to string constants: a docstring's, and those of a multi-line
    string (an f-string too) after its first line, which holds code as well."""
    lines = set()
    for node in ast.walk(tree):
        is_text = isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))
        if is_text and node.end_lineno > node.lineno:
            lines.update(range(node.lineno + 1, node.end_lineno + 1))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            lines.update(range(node.lineno, node.end_lineno + 1))  # a docstring is not code at all
    return lines


def counted_lines(first: int, last: int, strings: set[int]) -> int:
    """Lines from ``first`` to ``last`` that are not part of a string constant."""
    return sum(1 for number in range(first, last + 1) if number not in strings)


def parsed_modules():
    """Each service module's path (from the repository's root), line count, syntax tree and string lines."""
    for path in service_modules():
        source = path.read_text()
        tree = ast.parse(source, filename=str(path))
        yield path.relative_to(ROOT), len(source.splitlines()), tree, string_constant_lines(tree)


def long_functions(tree: ast.AST, strings: set[int]):
    """``(line, name, counted lines)`` of each function or method over the limit, decorators included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
            if (size := counted_lines(first, node.end_lineno, strings)) > MAX_FUNCTION_LINES:
                yield node.lineno, node.name, size


def test_service_modules_are_found():
    modules = {str(path.relative_to(ROOT)) for path in service_modules()}
    assert {"jobs/queue/services/claims.py", "pipeline_project/settings.py", "tracking/services.py"} <= modules
    assert not any("/migrations/" in module or module.startswith("tests/") for module in modules)


def test_no_module_is_over_400_lines():
    offenders = [
        f"{name}: {size} lines"
        for name, total, _tree, strings in parsed_modules()
        if (size := counted_lines(1, total, strings)) > MAX_MODULE_LINES
    ]
    assert not offenders, f"Over {MAX_MODULE_LINES} lines (string constants aside):\n" + "\n".join(offenders)


def test_no_function_is_over_60_lines():
    offenders = [
        f"{name}:{line} {function}(): {size} lines"
        for name, _total, tree, strings in parsed_modules()
        for line, function, size in long_functions(tree, strings)
    ]
    assert not offenders, f"Over {MAX_FUNCTION_LINES} lines (string constants aside):\n" + "\n".join(offenders)


def test_string_constants_do_not_count():
    source = textwrap.dedent(
        '''
        def f():
            """Doc
            string."""
            query = f"""
                SELECT {1}
                FROM t
            """

            return query
        '''
    )
    tree = ast.parse(source)
    function = tree.body[0]
    assert counted_lines(function.lineno, function.end_lineno, string_constant_lines(tree)) == 4


def test_a_long_function_is_found():
    body = "\n".join(f"    x{number} = {number}" for number in range(MAX_FUNCTION_LINES))
    tree = ast.parse(f"@decorated\ndef f():\n{body}\n")
    assert list(long_functions(tree, string_constant_lines(tree))) == [(2, "f", MAX_FUNCTION_LINES + 2)]


def module_name(path: Path) -> str:
    parts = path.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def app_of(module: str) -> str | None:
    """The app ``module`` belongs to, None for a kit (the runtime, pipeline_project's api, web, db)."""
    if module == RUNTIME or module.startswith(f"{RUNTIME}."):
        return None
    return next((app for app in APPS if module == app or module.startswith(f"{app}.")), None)


def imported_modules(tree: ast.AST, module: str) -> set[str]:
    """Every module a module imports, ``from package import name`` counted as ``package.name``
    (it names a module as often as not; a name that is not one is harmless here)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def crossing_imports():
    """``(module, imported)`` for each import of one app's module by another app's or a kit's."""
    for path, _total, tree, _strings in parsed_modules():
        module = module_name(path)
        for imported in imported_modules(tree, module):
            owner = app_of(imported)
            if owner is not None and owner != app_of(module):
                yield module, imported, owner


def test_the_runtime_imports_no_app():
    offenders = [
        f"{module} imports {imported}"
        for module, imported, _owner in crossing_imports()
        if app_of(module) is None and module.startswith(RUNTIME)
    ]
    assert not offenders, "The worker runtime is generic; apps register with it:\n" + "\n".join(offenders)


def test_no_app_imports_another_apps_private_module():
    offenders = [
        f"{module} imports {imported}"
        for module, imported, owner in crossing_imports()
        if app_of(module) is not None
        and imported != owner
        and imported.removeprefix(f"{owner}.").split(".")[0] not in PUBLIC_MODULES
    ]
    public = ", ".join(PUBLIC_MODULES)
    assert not offenders, f"An app uses another through its public modules ({public}):\n" + "\n".join(offenders)


def test_no_two_modules_of_one_app_share_a_name():
    names: dict[tuple[str, str], list[str]] = {}
    for path in service_modules():
        module = module_name(path.relative_to(ROOT))
        app = app_of(module)
        if app is not None and "management" not in path.parts and path.stem not in NAMES_DJANGO_ASKS_FOR:
            names.setdefault((app, path.stem), []).append(str(path.relative_to(ROOT)))
    shared = [f"{app}: {', '.join(paths)}" for (app, _name), paths in names.items() if len(paths) > 1]
    assert not shared, "Modules of one app with one name:\n" + "\n".join(shared)


def test_a_private_import_and_an_app_import_in_the_runtime_are_found():
    tree = ast.parse("from jobs.queue.services.operators import jobs_cancel\nfrom jobs.queue import models\n")
    assert {"jobs.queue.services.operators", "jobs.queue.models"} <= imported_modules(
        tree, "jobs.dbstates.services.prepare_jobs"
    )
    assert app_of("jobs.runtime.loop") is None and app_of("jobs.queue.worker.source") == "jobs.queue"
    assert app_of("jobs.dbstates.api.views") == "jobs.dbstates" and app_of("pipeline_project.web.handler") is None
