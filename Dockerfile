# One image for the web server, the job worker, the reaper and migrations (by command):
#   docker build -t pipeline-control .
#   docker run -e DATABASE_URL=... -e SECRET_KEY=... pipeline-control            # web on :8000
#   docker run -e DATABASE_URL=... -e SECRET_KEY=... pipeline-control worker     # runworker (WORKERS_JSON)
# See docker-compose.yml and the README's "Containers" section.
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

# OCR for the ingestion pipeline: Tesseract, and pdftoppm to render scanned PDF pages for it.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends tesseract-ocr poppler-utils \
    && rm -rf /var/lib/apt/lists/*

# Dependencies first, in a layer of their own: source changes do not reinstall them.
COPY requirements/service.txt requirements/service.txt
RUN pip install --no-cache-dir -r requirements/service.txt

COPY . .
# Static files served by whitenoise; the build needs no database (a throw-away key only here).
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput --verbosity 0

USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["/app/docker-entrypoint.sh"]
CMD ["web"]
