"""The service's code keeps its shape: no module over 400 lines, no function over 60.

Lines that belong to string constants (docstrings, SQL text) do not count: a long query or a
well-explained module is not what these limits are about. Every other line does, blank ones too.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICE_APPS = ("pipeline_project", "jobs", "ingestion", "tracking")
SKIPPED_DIRS = {"migrations", "tests", "bench", "__pycache__"}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def service_modules() -> list[Path]:
    return sorted(
        path
        for app in SERVICE_APPS
        for path in (ROOT / app).rglob("*.py")
        if not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts)
    )


def string_constant_lines(tree: ast.AST) -> set[int]:
    """The line numbers a string constant spans beyond its first (that line has code too)."""
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


def shape_offenders() -> list[str]:
    offenders = []
    for path in service_modules():
        source = path.read_text()
        source_lines = source.splitlines()
        tree = ast.parse(source, filename=str(path))
        strings = string_constant_lines(tree)
        name = path.relative_to(ROOT)
        module_lines = counted_lines(1, len(source_lines), strings)
        if module_lines > MAX_MODULE_LINES:
            offenders.append(f"{name}: {module_lines} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
                function_lines = counted_lines(first, node.end_lineno, strings)
                if function_lines > MAX_FUNCTION_LINES:
                    offenders.append(
                        f"{name}:{node.lineno} {node.name}(): {function_lines} lines (at most {MAX_FUNCTION_LINES})"
                    )
    return offenders


def test_service_modules_are_found():
    modules = {str(path.relative_to(ROOT)) for path in service_modules()}
    assert {"jobs/services/claims.py", "pipeline_project/settings.py", "tracking/services.py"} <= modules
    assert not any("/migrations/" in module for module in modules)


def test_modules_and_functions_keep_their_size():
    offenders = shape_offenders()
    assert not offenders, "Too long (string constants and blank lines aside):\n" + "\n".join(offenders)


def test_string_constants_do_not_count():
    source = 'def f():\n    """Doc\n    string."""\n    query = """\n        SELECT 1\n        FROM t\n    """\n    return query\n'
    tree = ast.parse(source)
    function = tree.body[0]
    assert counted_lines(function.lineno, function.end_lineno, string_constant_lines(tree)) == 3
