"""Database URLs, to Django's settings and back from psycopg's parameters, with one host or several.

``postgres://app@db1:5432,db2:5432/control?target_session_attrs=read-write`` names a primary and
its standby: libpq tries the hosts in turn and keeps the first that takes writes, so after a
failover every new connection finds the new primary (and the pool drops the connections left on a
server that turned read-only: ``connections.check_pooled_connection``). The URL is parsed by
libpq's own parser (``conninfo_to_dict``); what is not the target becomes a connection option.
"""

from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from psycopg.conninfo import conninfo_to_dict

_SETTINGS_OF = {"dbname": "NAME", "user": "USER", "password": "PASSWORD", "host": "HOST", "port": "PORT"}
# Options a URL made for a subprocess carries on (the rest are the process's own: its name, ...).
_CARRIED_OPTIONS = ("target_session_attrs", "sslmode", "connect_timeout")


def databases_from(default_url: str, pipeline_url: str | None, *, password: str | None) -> dict:
    """Django's DATABASES for DATABASE_URL and PIPELINE_DATABASE_URL (by default, the same servers
    with ``_pipeline`` after the database's name); ``password`` for a URL without its own (the
    secret file PostgreSQL's own container reads as POSTGRES_PASSWORD_FILE, say)."""
    return {
        "default": database_settings(default_url, password=password),
        "pipeline": database_settings(pipeline_url or pipeline_url_from(default_url), password=password),
    }


def database_settings(url: str, *, password: str | None = None) -> dict:
    """Django's DATABASES entry for ``url``; ``password`` if the URL has none."""
    params = conninfo_to_dict(url)
    entry = {setting: str(params.pop(key, "")) for key, setting in _SETTINGS_OF.items()}
    entry["PASSWORD"] = entry["PASSWORD"] or password or ""
    return {"ENGINE": "django.db.backends.postgresql", **entry, "OPTIONS": params}


def database_url(params: dict) -> str:
    """A DATABASE_URL for psycopg.connect() parameters: a socket directory as host, several hosts
    (``host="a,b"``, ``port="5432,5433"``) and the target's options included."""
    hosts = str(params.get("host") or "localhost").split(",")
    ports = str(params.get("port") or "").split(",")
    ports = ports * len(hosts) if len(ports) == 1 else ports
    netloc = ",".join(
        quote(host, safe="") + (f":{port}" if port else "") for host, port in zip(hosts, ports, strict=True)
    )
    password = f":{quote(params['password'], safe='')}" if params.get("password") else ""
    query = urlencode({key: params[key] for key in _CARRIED_OPTIONS if params.get(key)})
    return f"postgres://{params.get('user') or 'postgres'}{password}@{netloc}/{params['dbname']}" + (
        f"?{query}" if query else ""
    )


def pipeline_url_from(default_url: str) -> str:
    """The same server as DATABASE_URL, database name suffixed with ``_pipeline`` (the default)."""
    parts = urlsplit(default_url)
    name = parts.path.lstrip("/") or "postgres"
    return urlunsplit(parts._replace(path=f"/{name}_pipeline"))
