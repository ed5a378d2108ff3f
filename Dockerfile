# One image for the web server, the job worker, the reaper and migrations (by command):
#   docker build -t pipeline-control .
#   docker run -e DATABASE_URL=... -e SECRET_KEY=... pipeline-control            # web on :8000
#   docker run -e DATABASE_URL=... -e SECRET_KEY=... pipeline-control worker     # runworker (WORKERS_JSON)
#   docker run -e DATABASE_URL=... -e SECRET_KEY=... pipeline-control reaper     # runreaper
# See docker-compose.yml, docker-compose.scale.yml and the manual's docs/operating/containers.md.
FROM python:3.13.0-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    WEB_BIND=0.0.0.0:8000 \
    PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus

WORKDIR /app

RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /app --no-create-home app

# OCR for the ingestion pipeline: Tesseract, and pdftoppm to render scanned PDF pages for it. The
# database-state engine's image adds the PostgreSQL servers its states run on (the images it offers):
#   docker build --build-arg ENGINE_PACKAGES="postgresql-15" -t pipeline-control-engine .
ARG ENGINE_PACKAGES=""
# hadolint ignore=DL3008,SC2086
RUN apt-get update \
    && apt-get install -y --no-install-recommends tesseract-ocr poppler-utils $ENGINE_PACKAGES \
    && rm -rf /var/lib/apt/lists/*

# Dependencies first, in a layer of their own: source changes do not reinstall them.
COPY requirements/service.txt requirements/service.txt
RUN pip install --no-cache-dir -r requirements/service.txt

COPY . .
# Static files served by whitenoise; the build needs no database (a throw-away key only here).
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput --verbosity 0
# What the service writes (downloaded documents, the engine's state store; volumes mount over
# them) belongs to the user it runs as: the rest of /app is read-only to it.
RUN mkdir -p var/ingestion var/state-store var/scripts && chown -R 10001:10001 var

USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["/app/docker-entrypoint.sh"]
CMD ["web"]
