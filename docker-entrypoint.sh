#!/bin/sh
# One image, several roles: web (default), worker, reaper, migrate; `health` checks the role this
# container runs (the image's HEALTHCHECK); anything else runs as given.
set -eu

role="${1:-web}"
[ "$#" -gt 0 ] && shift

if [ "$role" = health ]; then
    # The role this container runs: PID 1's (tini -s -- /app/docker-entrypoint.sh ROLE ...), unless
    # PIPELINE_ROLE says it (a shared process namespace, a command that does not go through here).
    running="${PIPELINE_ROLE:-$(tr '\0' '\n' < /proc/1/cmdline 2>/dev/null | sed -n '/docker-entrypoint\.sh$/{n;p;q}')}"
    case "${running:-web}" in
        web) exec python -c 'import os, sys, urllib.request
port = (os.environ.get("WEB_PROBE_BIND") or os.environ.get("WEB_BIND", ":8000")).rpartition(":")[2]
sys.exit(urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status != 200)' ;;
        worker) exec python manage.py workerhealth ;;
        reaper) exec python manage.py workerhealth --reaper ;;
        migrate) exit 0 ;;  # nothing lives to be checked
        *) echo "cannot tell this container's role ($running): set PIPELINE_ROLE" >&2; exit 1 ;;
    esac
fi

if [ -z "${DATABASE_URL:-}" ] && [ -z "${DATABASE_URL_FILE:-}" ]; then
    echo "DATABASE_URL (or DATABASE_URL_FILE, a file holding it) is required, e.g. postgres://user@db:5432/control" >&2
    exit 64
fi
if [ -z "${SECRET_KEY:-}" ] && [ -z "${SECRET_KEY_FILE:-}" ]; then
    echo "SECRET_KEY (or SECRET_KEY_FILE) is required: a long random string, the same for every container" >&2
    exit 64
fi

case "$role" in
    web)
        # The web workers sum their Prometheus metrics through this directory: this role's only;
        # every other process of the image keeps its metrics in memory (a worker serves its own).
        export PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-/tmp/prometheus}"
        rm -rf "$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
        exec gunicorn -c pipeline_project/gunicorn_conf.py pipeline_project.asgi:application "$@"
        ;;
    worker) exec python manage.py runworker "$@" ;;
    reaper) exec python manage.py runreaper "$@" ;;
    migrate)
        # Creating the databases is safe to race, and each migrate waits for any other on its database.
        python manage.py ensuredatabases
        python manage.py migrate --noinput
        exec python manage.py migrate --noinput --database pipeline
        ;;
    *) exec "$role" "$@" ;;
esac
