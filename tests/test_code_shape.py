"""The service's code keeps its shape: no module over 400 lines, no function over 60; the worker
runtime and the shared layers (pipeline_project's api, web, db and its own modules) import no
app; an app meets another only through its public modules; no two modules of one app share a
name; every installed app of the service is one of APPS.

Lines that belong to multi-line string constants (SQL text) do not count: a long query is not what
these limits are about. A module's docstrings count (a module too long to read is too long,
however well explained); a function's do not. Every other line does, blank ones too.
"""

import ast
import textwrap
from pathlib import Path

from django.apps import apps as django_apps

ROOT = Path(__file__).resolve().parent.parent
SERVICE_APPS = ("pipeline_project", "jobs", "ingestion", "tracking")
SKIPPED_DIRS = {"migrations", "tests", "bench", "__pycache__"}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# The apps (innermost first: a module belongs to the first that contains it). The rest of the
# service is kits every app may use: the runtime (jobs.runtime) and the shared layers,
# pipeline_project's api, web, db and the project package's own modules (settings, urls, asgi...).
APPS = (
    "jobs.processes",
    "jobs.schedules",
    "jobs.dbstates",
    "pipeline_project.core",
    "pipeline_project.audit",
    "pipeline_project.demo",
    "jobs.queue",
    "ingestion",
    "tracking",
)
RUNTIME = "jobs.runtime"
# What an app offers the others: its state changes, its reads, and the APIs apps write work
# against (``@task``, ``@namespace``, the latter two also at their documented older paths; the
# audit trail's operator actions, which each app registers and checks).
PUBLIC_MODULES = ("services", "selectors", "handlers", "registry", "namespaces", "states", "actions")
# Module names Django looks for by name, which several packages of one app may need.
NAMES_DJANGO_ASKS_FOR = {"__init__", "apps", "admin", "models", "views", "urls", "serializers"}


def service_modules() -> list[Path]:
    return sorted(
        path
        for app in SERVICE_APPS
        for path in (ROOT / app).rglob("*.py")
        if not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts)
    )


def _docstrings(tree: ast.AST) -> list[ast.Expr]:
    """The docstrings (and any other bare string statement: a comment in quotes)."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    ]


def string_constant_lines(tree: ast.AST) -> set[int]:
    """The line numbers that belong to string constants other than docstrings: those of a
    multi-line string (an f-string too) after its first line, which holds code as well."""
    docstrings = {id(node.value) for node in _docstrings(tree)}
    lines = set()
    for node in ast.walk(tree):
        is_text = isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))
        if is_text and node.end_lineno > node.lineno and id(node) not in docstrings:
            lines.update(range(node.lineno + 1, node.end_lineno + 1))
    return lines


def docstring_lines(tree: ast.AST) -> set[int]:
    """The line numbers of the docstrings: not code at all, and not counted in a function."""
    return {number for node in _docstrings(tree) for number in range(node.lineno, node.end_lineno + 1)}


def module_size(source: str, tree: ast.AST) -> int:
    """A module's counted lines: every line, its docstrings' too, but a multi-line constant's text."""
    return counted_lines(1, len(source.splitlines()), string_constant_lines(tree))


def counted_lines(first: int, last: int, strings: set[int]) -> int:
    """Lines from ``first`` to ``last`` that are not part of a string constant."""
    return sum(1 for number in range(first, last + 1) if number not in strings)


def parsed_modules():
    """Each service module's path (from the repository's root), source, syntax tree and the lines
    a function's size does not count (its string constants' and docstrings')."""
    for path in service_modules():
        source = path.read_text()
        tree = ast.parse(source, filename=str(path))
        yield path.relative_to(ROOT), source, tree, string_constant_lines(tree) | docstring_lines(tree)


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
        for name, source, tree, _strings in parsed_modules()
        if (size := module_size(source, tree)) > MAX_MODULE_LINES
    ]
    assert not offenders, f"Over {MAX_MODULE_LINES} lines (docstrings counted, SQL aside):\n" + "\n".join(offenders)


def test_a_module_counts_its_docstrings_not_its_sql():
    docstring = "\n".join(['"""Doc', *(["line"] * MAX_MODULE_LINES), '"""'])
    query = "\n".join(['QUERY = """', *(["SELECT 1"] * MAX_MODULE_LINES), '"""'])

    assert module_size(docstring, ast.parse(docstring)) == MAX_MODULE_LINES + 2
    assert module_size(query, ast.parse(query)) == 1


def test_no_function_is_over_60_lines():
    offenders = [
        f"{name}:{line} {function}(): {size} lines"
        for name, _source, tree, strings in parsed_modules()
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
    skipped = string_constant_lines(tree) | docstring_lines(tree)
    assert counted_lines(function.lineno, function.end_lineno, skipped) == 4


def test_a_long_function_is_found():
    body = "\n".join(f"    x{number} = {number}" for number in range(MAX_FUNCTION_LINES))
    tree = ast.parse(f"@decorated\ndef f():\n{body}\n")
    assert list(long_functions(tree, string_constant_lines(tree) | docstring_lines(tree))) == [
        (2, "f", MAX_FUNCTION_LINES + 2)
    ]


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
    for path, _source, tree, _strings in parsed_modules():
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


def app_imports_of_shared_layers(modules) -> list[str]:
    """``modules``' (``(module name, syntax tree)``) imports of an app by a module of no app (a shared
    layer: pipeline_project's api, web, db, the project package's own modules), the runtime aside."""
    return [
        f"{module} imports {imported}"
        for module, tree in modules
        if app_of(module) is None and not module.startswith(RUNTIME)
        for imported in sorted(imported_modules(tree, module))
        if app_of(imported) is not None
    ]


def test_the_shared_layers_import_no_app():
    offenders = app_imports_of_shared_layers((module_name(path), tree) for path, _s, tree, _l in parsed_modules())
    assert not offenders, (
        "The shared layers reach the apps through settings (dotted paths) or registries the apps fill:\n"
        + "\n".join(offenders)
    )


def apps_missing(installed: list[str]) -> list[str]:
    """The service's installed apps (those under SERVICE_APPS) that APPS does not name."""
    return [app for app in installed if app.split(".")[0] in SERVICE_APPS and app not in APPS]


def test_every_installed_app_of_the_service_is_one_of_apps():
    # By each app's name (an entry naming a config of Django's admin is Django's admin).
    installed = [config.name for config in django_apps.get_app_configs()]
    assert not apps_missing(installed), "Add to APPS (the shape rules cover every app)"


def test_the_shared_layers_and_apps_are_told_apart():
    shared = ("pipeline_project.urls", "pipeline_project.settings", "pipeline_project.api.permissions")
    assert all(app_of(module) is None for module in (*shared, "pipeline_project.web.middleware"))
    assert app_of("pipeline_project.audit.services") == "pipeline_project.audit"
    assert app_of("pipeline_project.demo.jobs") == "pipeline_project.demo"
    tree = ast.parse("from pipeline_project.core.models import ApiToken\nfrom pipeline_project.db import sql\n")
    assert app_imports_of_shared_layers([("pipeline_project.api.permissions", tree)]) == [
        "pipeline_project.api.permissions imports pipeline_project.core.models",
        "pipeline_project.api.permissions imports pipeline_project.core.models.ApiToken",
    ]


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
