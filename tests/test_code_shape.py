"""The service's code keeps its shape: no module over 400 lines, no function over 60.

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
    assert {"jobs/services/claims.py", "pipeline_project/settings.py", "tracking/services.py"} <= modules
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
