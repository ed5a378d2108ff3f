"""``pipeline-client`` (or ``python -m pipeline_client``): the client's calls from a shell, with
exit codes a script can test (listed in ``--help`` and in the manual)."""

import logging
import os
import sys

from pipeline_client.cli.commands import COMMANDS, UsageError
from pipeline_client.cli.exits import (
    API_ERROR,
    CONFLICT,
    CONNECTION_FAILED,
    INTERRUPTED,
    NOT_ALLOWED,
    NOT_FOUND,
    OK,
    UNAVAILABLE,
    USAGE,
)
from pipeline_client.cli.output import Output
from pipeline_client.cli.parser import build_parser
from pipeline_client.client import Client
from pipeline_client.errors import (
    ApiError,
    AuthError,
    ConflictError,
    ConnectionFailedError,
    NotFoundError,
    UnavailableError,
)

EXIT_CODES = (
    (NotFoundError, NOT_FOUND),
    (AuthError, NOT_ALLOWED),
    (ConflictError, CONFLICT),
    (UnavailableError, UNAVAILABLE),
)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    output = Output(as_json=getattr(args, "json", False))
    # People see the retries as they happen; a script's stderr holds only the error's JSON.
    logging.basicConfig(
        format="pipeline-client: %(message)s", level=logging.ERROR if output.as_json else logging.WARNING
    )
    url = getattr(args, "url", None) or os.environ.get("PIPELINE_URL")
    token = getattr(args, "token", None) or os.environ.get("PIPELINE_TOKEN")
    if not url or not token:
        parser.print_usage(sys.stderr)
        output.error(UsageError("give the service's --url and --token (or PIPELINE_URL, PIPELINE_TOKEN)"), code="usage")
        return USAGE
    command = COMMANDS[(args.command, getattr(args, "action", None))]
    options = {name: getattr(args, name) for name in ("timeout", "retries") if hasattr(args, name)}
    client = Client(url, token, **options)
    try:
        result = command(client, args, output)
    except UsageError as exc:
        output.error(exc, code="usage")
        return USAGE
    except ApiError as exc:
        output.error(exc)
        return next((code for kind, code in EXIT_CODES if isinstance(exc, kind)), API_ERROR)
    except ConnectionFailedError as exc:
        output.error(exc, code="connection_failed")
        return CONNECTION_FAILED
    except KeyboardInterrupt:
        return INTERRUPTED
    finally:
        client.close()
    if isinstance(result, int):
        return result
    output.result(result)
    return OK
