"""The exit codes, one place: the commands return them, ``--help`` lists them."""

OK = 0
API_ERROR = 1
USAGE = 2
NOT_FOUND = 3
CONNECTION_FAILED = 4
NOT_ALLOWED = 5
CONFLICT = 6
UNAVAILABLE = 7
JOB_UNSUCCESSFUL = 8
INTERRUPTED = 130  # as a shell reports Ctrl-C

MEANINGS = {
    OK: "done (follow: the job succeeded)",
    API_ERROR: "the service refused the request (400, and any error answer not below)",
    USAGE: "usage error (arguments; no URL or token)",
    NOT_FOUND: "not found (404)",
    CONNECTION_FAILED: "connection failure (after the retries)",
    NOT_ALLOWED: "not authenticated or not allowed (401, 403: the token lacks a scope)",
    CONFLICT: "conflict (409: an illegal transition, a finished job, a key naming another job)",
    UNAVAILABLE: "unavailable (429 or 503 after the retries)",
    JOB_UNSUCCESSFUL: "follow: the job ended failed, canceled or lost",
    INTERRUPTED: "interrupted (Ctrl-C)",
}
