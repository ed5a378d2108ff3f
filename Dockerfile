# One image for every role, chosen by its command (docker-entrypoint.sh): web (default), worker,
# reaper, migrate. Built by deploy/image/build, which pins the base by its digest:
#   deploy/image/build                  # localhost/pipeline-control:<version>
#   deploy/image/build --target engine  # localhost/pipeline-control-engine:<version>, + PostgreSQL servers
# With a registry: docker build --build-arg BASE_IMAGE=debian:trixie-slim@sha256:<digest> .
# Reproducible: the base by digest, Debian packages at pinned versions, Python packages from a
# lock with hashes (requirements/service.lock, `make lock`). See docs/operating/containers.md.
ARG BASE_IMAGE

# Debian trixie: its python3 is 3.13, as .python-version. What every role needs at run time:
# Python, Tesseract and pdftoppm (the ingestion pipeline's OCR), tini (PID 1, or a subreaper in a
# shared process namespace: signals forwarded, orphans reaped), CA certificates (documents downloaded over HTTPS).
FROM ${BASE_IMAGE} AS system
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        python3.13=3.13.5-2+deb13u5 \
        tesseract-ocr=5.5.0-1+b1 \
        tesseract-ocr-eng=1:4.1.0-2 \
        poppler-utils=25.03.0-5+deb13u4 \
        tini=0.19.0-3+b8 \
        ca-certificates=20250419+deb13u1 \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
    && groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /app --no-create-home app

# The virtualenv and the application, built apart: python3.13-venv, pip and the build's files stay here.
FROM system AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.13-venv=3.13.5-2+deb13u5 \
    && rm -rf /var/lib/apt/lists/*
# A host behind a TLS-inspecting proxy mounts its CA bundle for the build only (deploy/image/build).
# Only English is served (LANGUAGE_CODE en-us, no LocaleMiddleware): the packages' catalogues of
# other languages (33 MB) are left out.
ARG PIP_CERT_MOUNT=/run/build-ca/ca-certificates.crt
COPY requirements/service.lock /tmp/service.lock
RUN if [ -f "$PIP_CERT_MOUNT" ]; then export PIP_CERT="$PIP_CERT_MOUNT"; fi \
    && python3.13 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-compile \
        --require-hashes --no-deps --only-binary :all: -r /tmp/service.lock \
    && /opt/venv/bin/pip uninstall --yes --quiet pip \
    && rm /tmp/service.lock \
    && find /opt/venv/lib/python3.13/site-packages -type d -name locale -exec sh -c \
        'for d in "$1"/*/; do case "$(basename "$d")" in en|en_*) ;; *) rm -rf "$d" ;; esac; done' _ {} \;
WORKDIR /app
COPY manage.py docker-entrypoint.sh ./
COPY pipeline_project pipeline_project
COPY tracking tracking
COPY jobs jobs
COPY ingestion ingestion
COPY templates templates
# Static files (served by whitenoise) need no database: a throw-away key here only. Bytecode
# compiled now: the root filesystem is read-only at run time, and each start would compile again
# (a health check's `manage.py workerhealth` took 1.4-3.0 s uncompiled, 1 s compiled).
RUN SECRET_KEY=collectstatic-only /opt/venv/bin/python manage.py collectstatic --noinput --verbosity 0 \
    && /opt/venv/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/venv /app \
    && mkdir -p var/ingestion var/state-store var/scripts

FROM system AS runtime
ARG VERSION=dev
LABEL org.opencontainers.image.title="pipeline-control" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="docs/operating/containers.md"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    WEB_BIND=0.0.0.0:8000 \
    WEB_PROBE_BIND=0.0.0.0:9000
COPY --from=build /opt/venv /opt/venv
# /app is read-only to the service; what it writes (var/: downloaded documents, the engine's state
# store; volumes mount over it) belongs to uid 10001 and to group 0, so that an arbitrary uid of
# group 0 (OpenShift's) may write there too.
COPY --from=build --chown=10001:0 /app /app
RUN chmod -R g=u /app/var
WORKDIR /app
USER 10001:0
EXPOSE 8000 9000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=10s --start-period=30s --retries=3 CMD ["/app/docker-entrypoint.sh", "health"]
ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/app/docker-entrypoint.sh"]
CMD ["web"]

# The database-state engine's image: the service's, every layer shared, plus the PostgreSQL server
# its states run on (image postgres:17), with no cluster of its own (Debian's would create one).
FROM runtime AS engine
USER 0
RUN mkdir -p /etc/postgresql-common \
    && echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf \
    && apt-get update \
    && apt-get install -y --no-install-recommends postgresql-17=17.12-0+deb13u1 \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log /var/lib/postgresql/* \
    && /usr/lib/postgresql/17/bin/postgres --version
USER 10001:0

# The default target (a build without --target): the service's image.
FROM runtime
