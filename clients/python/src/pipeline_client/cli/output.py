"""What the commands print: JSON for scripts (``--json``: one object, or one event a line), or
short ``field: value`` lines for people. Errors go to stderr, in the API's error shape with --json."""

import json
import sys
from typing import Any, TextIO

from pipeline_client.errors import ApiError
from pipeline_client.models import JobEvent, to_json


class Output:
    def __init__(self, *, as_json: bool, out: TextIO = sys.stdout, err: TextIO = sys.stderr):
        self.as_json, self.out, self.err = as_json, out, err

    def result(self, value: Any) -> None:
        data = to_json(value)
        if self.as_json:
            self._line(self.out, json.dumps(data))
        elif isinstance(data, list):
            self._line(self.out, "\n\n".join(_fields(item) for item in data))
        else:
            self._line(self.out, _fields(data))

    def event(self, event: JobEvent) -> None:
        data = to_json(event)
        if self.as_json:
            self._line(self.out, json.dumps(data))
        else:
            self._line(
                self.out, f"{data['ts']}  {data['event_id']:>6}  {data['kind']:<9}  {json.dumps(data['payload'])}"
            )

    def note(self, text: str) -> None:
        """A line for people only: scripts reading --json get nothing but the results."""
        if not self.as_json:
            self._line(self.out, text)

    def error(self, error: Exception, *, code: str = "") -> None:
        """``code`` names an error that is not the service's (no answer, bad usage)."""
        if isinstance(error, ApiError):
            shape = error.to_json()
        else:
            shape = {"status": None, "code": code, "message": str(error), "details": {}}
        if self.as_json:
            self._line(self.err, json.dumps(shape))
        else:
            status = f", HTTP {shape['status']}" if shape["status"] else ""
            details = f"\n{json.dumps(shape['details'])}" if shape["details"] else ""
            self._line(self.err, f"pipeline-client: {shape['message']} ({shape['code']}{status}){details}")

    @staticmethod
    def _line(stream: TextIO, text: str) -> None:
        stream.write(text + "\n")
        stream.flush()  # a follower's lines as they come, through a pipe too


def _fields(data: dict) -> str:
    return "\n".join(
        f"{name}: {value if isinstance(value, str) else json.dumps(value)}"
        for name, value in data.items()
        if value not in (None, [], {})
    )
