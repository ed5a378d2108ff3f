"""The route sweep's machinery: every JSON route the URL resolver knows, the inputs a careless or
hostile client sends, and what each answer must be.

Routes come from the resolver, so a new route is swept without anyone listing it. An answer
must never be a 500, a redirect or HTML; an error must be JSON in its path's shape; a request
that is refused must leave both databases as they were.
"""

import json
import re
import sys
import uuid
from dataclasses import dataclass, field
from urllib.parse import quote

from django.core.signals import got_request_exception
from django.db import connections
from django.urls import URLPattern, URLResolver, get_resolver

from pipeline_project.api.errors import error_shape
from tests.core.helpers import error_problem

METHODS = ("GET", "HEAD", "OPTIONS", "PROPFIND", "PUT", "PATCH", "POST", "DELETE")  # DELETE last: it may succeed
BODY_METHODS = ("PUT", "PATCH", "POST", "DELETE")
JSON = "application/json"
# Server-side statuses an API answers by design, in its error shape: a process call whose step
# did not finish in time (504: the task goes on).
DESIGNED_5XX = {504}
_PARAMETER = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")


@dataclass(frozen=True)
class Route:
    template: str  # "/api/v1/jobs/<uuid:job_id>"
    view: str

    @property
    def parameters(self) -> list[tuple[str, str]]:
        """(name, converter) of each path parameter."""
        return [(match["name"], match["converter"] or "str") for match in _PARAMETER.finditer(self.template)]

    def path(self, values: dict[str, str]) -> str:
        """The path with each parameter replaced by its value (already URL-encoded)."""
        return _PARAMETER.sub(lambda match: values[match["name"]], self.template)


def json_routes() -> list[Route]:
    """Every route whose errors are JSON (settings.JSON_ERROR_PATHS), from the URL resolver."""
    routes = []
    for template, callback in _walk(get_resolver().url_patterns, "/"):
        if error_shape(template):
            view = getattr(callback, "view_class", callback)
            routes.append(Route(template=template, view=f"{view.__module__}.{view.__qualname__}"))
    return routes


def _walk(patterns, prefix: str):
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern.callback


def route_shape(path: str) -> str:
    """A route or OpenAPI path with every parameter as ``{}``: how the two are matched."""
    return re.sub(r"\{[^}]+\}|<[^>]+>", "{}", path)


@dataclass
class Contract:
    """What the OpenAPI documents say of the routes they describe: each operation's request
    body properties, and the answers whose documented body is not the error shape (sqlrs's
    DeleteResult on a 409)."""

    fields: dict[tuple[str, str], dict[str, dict]] = field(default_factory=dict)
    other_bodies: set[tuple[str, str, int]] = field(default_factory=set)

    @classmethod
    def from_documents(cls, documents: dict[str, dict]) -> "Contract":
        """``documents``: each OpenAPI document by the path prefix it is served under."""
        contract = cls()
        for prefix, document in documents.items():
            schemas = document.get("components", {}).get("schemas", {})
            for path, operations in document["paths"].items():
                shape = route_shape(prefix + path)
                for method, operation in operations.items():
                    if not isinstance(operation, dict) or "responses" not in operation:
                        continue
                    body = (operation.get("requestBody") or {}).get("content", {}).get(JSON, {}).get("schema")
                    if body:
                        contract.fields[(shape, method.upper())] = _properties(body, schemas)
                    for status, answer in operation["responses"].items():
                        schema = (answer.get("content") or {}).get(JSON, {}).get("schema", {})
                        named = schema.get("$ref", "").rsplit("/", 1)[-1]
                        if status.isdigit() and int(status) >= 400 and named and named not in ERROR_SCHEMAS:
                            contract.other_bodies.add((shape, method.upper(), int(status)))
        return contract

    def properties(self, route: "Route") -> dict[str, dict[str, dict]]:
        """The documented body properties of each method of ``route``."""
        shape = route_shape(route.template)
        return {method: found for (path, method), found in self.fields.items() if path == shape}

    def all_properties(self) -> dict[str, dict]:
        return {name: spec for found in self.fields.values() for name, spec in found.items()}


ERROR_SCHEMAS = {"Error", "ErrorResponse"}


def _properties(schema: dict, schemas: dict) -> dict[str, dict]:
    """Every property a body schema names, through $ref, allOf, oneOf and anyOf."""
    if "$ref" in schema:
        return _properties(schemas.get(schema["$ref"].rsplit("/", 1)[-1], {}), schemas)
    found = {}
    for combined in ("allOf", "oneOf", "anyOf"):
        for part in schema.get(combined, []):
            found.update(_properties(part, schemas))
    for name, spec in schema.get("properties", {}).items():
        found[name] = schemas.get(spec["$ref"].rsplit("/", 1)[-1], spec) if "$ref" in spec else spec
    return found


def converter_value(converter: str) -> str:
    """A well-formed value of a converter that names nothing."""
    if converter == "uuid":
        return str(uuid.uuid4())
    if converter == "int":
        return "987654321"
    return f"no-such-{uuid.uuid4().hex[:8]}"


# Path parameter values a hostile client sends, URL-encoded as they go on the wire.
HOSTILE_VALUES = {
    "long": "x" * 3000,
    "nul": "a%00b",
    "unicode": quote("é∞\u2028漢", safe=""),
    "broken-utf8": "%ff%fe",
    "traversal": "..%2F..%2Fetc",
    "control": "a%0Ab%09",
}

# Query strings, each with one parameter a list, a filter or a flag might misread.
BAD_QUERIES = [
    "limit=-1",
    "limit=abc&offset=1e9",
    "limit=%C2%B2",  # ² is a digit to str.isdigit()
    "limit=99999999999999999999999999&offset=-99999999999999999999",
    "cursor=garbage&page=%FF",
    "status=no-such-status&queue=" + "q" * 2000,
    "created_after=not-a-date&created_before=2026-13-45T99:99:99",
    "follow=maybe&after=-1&dry_run=maybe&force=2&recurse=yes-please",
    "args=%7Bbroken&error=%25&updated_since=yesterday&needs_review=perhaps",
    "x=%00",
    "limit=1&limit=2&limit=",
]


# Headers a careless client sends (as Django's test client takes them).
BAD_HEADERS = {
    "last-event-id-negative": {"HTTP_LAST_EVENT_ID": "-1"},
    "last-event-id-long": {"HTTP_LAST_EVENT_ID": "9" * 5000},
    "range-garbage": {"HTTP_RANGE": "events=abc-"},
    "range-huge": {"HTTP_RANGE": "events=99999999999999999999999-"},
    "accept-html": {"HTTP_ACCEPT": "text/html"},
    "authorization-basic": {"HTTP_AUTHORIZATION": "Basic dXNlcjpwYXNz"},
    "authorization-garbage": {"HTTP_AUTHORIZATION": "Bearer \u00ff\u00fe with spaces"},
    "request-id-hostile": {"HTTP_X_REQUEST_ID": "a\nb" * 100},
}


@dataclass(frozen=True)
class Body:
    name: str
    content: bytes
    content_type: str = JSON


def bodies(max_bytes: int, wrong: dict[str, object]) -> list[Body]:
    """Malformed, unknown, oversized, hostile and wrongly typed bodies; ``wrong`` is a body of the
    route's own fields, each of the wrong type."""
    return [
        Body("empty", b""),
        Body("empty-object", b"{}"),
        Body("malformed", b'{"queue": '),
        Body("array", b"[1, 2]"),
        Body("string", b'"text"'),
        Body("null", b"null"),
        Body("unknown-field", b'{"surely_not_a_field": 1}'),
        Body("wrong-types", json.dumps(wrong).encode()),
        Body("nul", b'{"name": "a\\u0000b", "queue": "a\\u0000b"}'),
        Body("lone-surrogate", b'{"name": "\\ud800", "queue": "\\udfff"}'),
        Body("deep", b"[" * 200 + b"]" * 200),
        Body("huge-numbers", b'{"limit": 1e400, "priority": 123456789012345678901234567890, "shard": -1e-400}'),
        Body("not-utf8", b'{"name": "\xff\xfe"}'),
        Body("oversized", b'{"a": "' + b"x" * max_bytes + b'"}'),
        Body("form", b"queue=a&task=%00", "application/x-www-form-urlencoded"),
        Body(
            "multipart",
            b'--b\r\nContent-Disposition: form-data; name="f"\r\n\r\nv\r\n--b--\r\n',
            "multipart/form-data; boundary=b",
        ),
        Body("text", b"hello", "text/plain"),
        Body("odd-charset", b"{}", "application/json; charset=klingon"),
    ]


# Values of the wrong kind for a property of each schema type: another type, out of range, hostile.
WRONG_VALUES = {
    "string": [12345, ["text"], "", "a\u0000b", "x" * 10_000],
    "integer": ["twelve", 1.5, 2**70, -(2**70), True],
    "number": ["twelve", [1]],
    "boolean": ["maybe", 2],
    "array": ["x", [None], [{}], [[{"deep": [None]}]], [0] * 20_000],
    "object": ["x", [], {}, {"surely_not_a_field": {"\u0000": None}}],
}


def wrong_types(properties: dict[str, dict]) -> dict[str, object]:
    """Each property with a value of another type than its schema's."""
    return {name: wrong_values(spec)[0] for name, spec in properties.items()}


def wrong_values(spec: dict) -> list:
    kind = spec.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if "enum" in spec:
        return ["surely-not-a-choice", *WRONG_VALUES.get(kind, [])]
    return WRONG_VALUES.get(kind, [[[{}]], "x"])


def field_bodies(properties: dict[str, dict]) -> list[Body]:
    """One body per property and wrong value, the property alone: every field's own checks."""
    return [
        Body(f"{name}={json.dumps(value)[:24]}", json.dumps({name: value}).encode())
        for name, spec in properties.items()
        for value in wrong_values(spec)
    ]


@dataclass
class Finding:
    route: str
    method: str
    path: str
    who: str
    body: str
    status: int
    problem: str

    def reproduction(self) -> str:
        return f"{self.method} {self.path} as {self.who}, body {self.body}: {self.status} — {self.problem}"


@dataclass
class Sweep:
    """Sends requests through a test client and records every answer that breaks the rules."""

    contract: Contract = field(default_factory=Contract)
    findings: list[Finding] = field(default_factory=list)
    requests: int = 0
    _baseline: dict | None = None
    _exception: str = ""

    def __enter__(self):
        got_request_exception.connect(self._record_exception)
        return self

    def __exit__(self, *exc_info):
        got_request_exception.disconnect(self._record_exception)

    def rebaseline(self) -> None:
        """The databases were changed on purpose (new objects to name): compare with them from now on."""
        self._baseline = None

    def _record_exception(self, sender, request=None, **kwargs):
        kind, value, _traceback = sys.exc_info()
        self._exception = f"{kind.__name__}: {str(value)[:300]}" if kind else ""

    def send(self, client, route: Route, who: str, method: str, path: str, body: Body | None = None, **headers) -> int:
        self.requests += 1
        self._exception = ""
        if self._baseline is None:
            self._baseline = fingerprint()
        payload = body.content if body else b""
        content_type = body.content_type if body else JSON
        response = client.generic(method, path, payload, content_type=content_type, **headers)
        status, problem = response.status_code, self._problem(route, method, path, response)
        response.close()
        if 200 <= status < 300 or status in DESIGNED_5XX:
            self._baseline = None  # an accepted request may write: the next one compares with what it left
        elif problem is None and (changed := _changed_tables(self._baseline, fingerprint())):
            problem = f"refused, yet it changed {', '.join(changed)}"
            self._baseline = None
        if problem:
            described = f"{body.name} ({content_type})" if body else "none"
            described += f", headers {headers}" if headers else ""
            self.findings.append(Finding(route.template, method, path[:160], who, described, status, problem))
        return status

    def _problem(self, route: Route, method: str, path: str, response) -> str | None:
        status, content_type = response.status_code, response.get("Content-Type", "")
        if status >= 500 and status not in DESIGNED_5XX:
            return f"server error {self._exception or response.content[:200]!r}"
        if 300 <= status < 400:
            return f"redirect to {response.get('Location')}"
        if (route_shape(route.template), method, status) in self.contract.other_bodies:
            return None if content_type.startswith(JSON) else f"{status} answered {content_type}"
        if status >= 400 and method != "HEAD" and not response.streaming:
            return error_problem(path.split("?")[0], status, content_type, response.content)
        if status >= 400 and not content_type.startswith(JSON):
            return f"{status} answered {content_type}"
        if content_type.startswith("text/html") and not route.view.endswith("DocsView"):
            return f"{status} answered HTML"
        return None

    def report(self) -> str:
        by_route: dict[str, list[Finding]] = {}
        for finding in self.findings:
            by_route.setdefault(finding.route, []).append(finding)
        lines = [f"{len(self.findings)} of {self.requests} answers broke the rules, on {len(by_route)} routes:"]
        for route, findings in sorted(by_route.items()):
            problems = sorted({finding.problem for finding in findings})
            lines.append(f"\n{route} ({len(findings)} answers, {len(problems)} distinct problems)")
            lines.extend(f"  {finding.reproduction()}" for finding in findings[:6])
            lines.extend(f"  - {problem}" for problem in problems[:10])
        return "\n".join(lines)


# Columns that bookkeeping moves on a request that is otherwise refused: a token's last use.
BOOKKEEPING_COLUMNS = {"api_tokens": {"last_used_at"}}


def fingerprint() -> dict[str, str]:
    """What each table holds, in both databases: its row count and newest row version (an md5
    of its rows for a table that bookkeeping writes to)."""
    digests = {}
    for alias in ("default", "pipeline"):
        with connections[alias].cursor() as cursor:
            cursor.execute(_fingerprint_query(alias))
            digests.update({f"{alias}.{table}": digest for table, digest in cursor.fetchall()})
    return digests


_QUERIES: dict[str, str] = {}


def _fingerprint_query(alias: str) -> str:
    if alias not in _QUERIES:
        connection = connections[alias]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.table_name, array_agg(c.column_name::text ORDER BY c.ordinal_position) "
                "FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name) "
                "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' GROUP BY 1 ORDER BY 1"
            )
            tables = cursor.fetchall()
        quote_name = connection.ops.quote_name
        selects = []
        for table, columns in tables:
            if table not in BOOKKEEPING_COLUMNS:
                # Every write leaves a row version with a newer xmin, or fewer rows: no need to read them.
                selects.append(
                    f"SELECT '{table}', count(*) || '/' || coalesce(max(xmin::text::bigint), 0) FROM {quote_name(table)}"
                )
                continue
            kept = ", ".join(quote_name(column) for column in columns if column not in BOOKKEEPING_COLUMNS[table])
            selects.append(
                f"SELECT '{table}', md5(coalesce(string_agg(r::text, '|' ORDER BY r::text), '')) "
                f"FROM (SELECT {kept} FROM {quote_name(table)}) r"
            )
        _QUERIES[alias] = " UNION ALL ".join(selects)
    return _QUERIES[alias]


def _changed_tables(before: dict, after: dict) -> list[str]:
    return sorted(table for table in after.keys() | before.keys() if before.get(table) != after.get(table))
