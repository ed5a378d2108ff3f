#!/bin/sh
# One image, several roles: web (default), worker, reaper, migrate; anything else runs as given.
set -eu

if [ -z "${DATABASE_URL:-}" ]; then
    echo "DATABASE_URL is required, e.g. postgres://user:password@db:5432/control" >&2
    exit 64
fi
if [ -z "${SECRET_KEY:-}" ]; then
    echo "SECRET_KEY is required (a long random string, the same for every container)" >&2
    exit 64
fi

role="${1:-web}"
[ "$#" -gt 0 ] && shift
case "$role" in
    web)
        # The web workers sum their Prometheus counters through this directory.
        rm -rf "$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
        exec gunicorn -c pipeline_project/gunicorn_conf.py pipeline_project.asgi:application "$@"
        ;;
    worker) exec python manage.py runworker "$@" ;;
    reaper) exec python manage.py runreaper "$@" ;;
    migrate)
        python manage.py ensuredatabases
        python manage.py migrate --noinput
        exec python manage.py migrate --noinput --database pipeline
        ;;
    *) exec "$role" "$@" ;;
esac
