"""Settings, all read from the environment.

Production must set ``DATABASE_URL`` and ``SECRET_KEY``; everything else has a safe
default (DEBUG off, only local hosts allowed). With no ``DATABASE_URL`` the project runs
on the embedded PostgreSQL in ``var/postgres`` (see ``embedded_postgres``).
"""

import json
import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from pipeline_project.db.connections import check_pooled_connection
from pipeline_project.db.urls import databases_from
from pipeline_project.environment import env_bool, env_list, env_number, env_secret
from pipeline_project.logging import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"


def _persisted_secret_key() -> str:
    """A random key kept in var/ so sessions survive restarts of a local install."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


DEBUG = env_bool("DEBUG")
SECRET_KEY = env_secret("SECRET_KEY") or _persisted_secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")
# The probe port (WEB_PROBE_BIND, the image's :9000, served beside WEB_BIND): /health, /status and
# /metrics only, with no token and whatever the Host (web.middleware.ProbeMiddleware). Keep it inside.
WEB_PROBE_BIND = os.environ.get("WEB_PROBE_BIND", "")
WEB_PROBE_PORT = WEB_PROBE_BIND.rpartition(":")[2] or None
WEB_PROBE_ANSWERS = {
    "/health": "pipeline_project.core.views.health",
    "/status": "pipeline_project.core.views.status_answer",
    "/metrics": "pipeline_project.core.views.metrics_answer",
}

# Production is HTTPS=1 behind TLS: secure cookies, HSTS, the proxy's scheme header, and plain
# HTTP redirected, except the endpoints that health checks and scrapers call inside the network.
# `manage.py check --deploy` has nothing to say about these settings.
if env_bool("HTTPS"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^health$", r"^status$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = 31536000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("HSTS_PRELOAD", True)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    "pipeline_project.web.admin_site.PipelineAdminConfig",  # django.contrib.admin, its site the project's
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "pgtrigger",
    "pipeline_project.core",
    "tracking",
    "jobs.queue",
    "jobs.processes",
    "jobs.schedules",
    "ingestion",
    "jobs.dbstates",
    "pipeline_project.demo",
    "pipeline_project.audit",
]

# Every answer carries the security headers: the middleware that add them come first, outside
# any that may raise (a disallowed Host, say), and the ones that refuse requests come last, so
# their answers pass back through the rest (X-Request-ID, Vary) as any other answer does. The
# refusers still run before any view or the CSRF check (process_view); nothing above reads a body.
MIDDLEWARE = [
    "pipeline_project.web.middleware.RequestIdMiddleware",
    "pipeline_project.web.middleware.SecurityMiddleware",
    "pipeline_project.web.middleware.XFrameOptionsMiddleware",
    "pipeline_project.web.middleware.ProbeMiddleware",
    "pipeline_project.web.middleware.WhiteNoiseMiddleware",
    "pipeline_project.web.middleware.SessionMiddleware",
    "pipeline_project.web.middleware.CommonMiddleware",
    "pipeline_project.web.middleware.CsrfViewMiddleware",
    "pipeline_project.web.middleware.AuthenticationMiddleware",
    "pipeline_project.web.middleware.MessageMiddleware",
    "pipeline_project.web.middleware.JSONErrorsMiddleware",
    "pipeline_project.web.middleware.BodySizeLimitMiddleware",
    "pipeline_project.web.middleware.RejectNulMiddleware",
]

# Django looks for its own dotted paths; the subclasses above are checked in core.checks instead.
SILENCED_SYSTEM_CHECKS = ["security.W001", "security.W002", "security.W003"]

ROOT_URLCONF = "pipeline_project.urls"
WSGI_APPLICATION = "pipeline_project.wsgi.application"
ASGI_APPLICATION = "pipeline_project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # The job console's tags live with the console, not in an app's templatetags.
            "libraries": {name: f"jobs.queue.console.templatetags.{name}" for name in ("job_times", "status_palette")},
        },
    },
]

# --- Databases ------------------------------------------------------------------------
# ``default`` holds auth, admin, tokens and the job queue; ``pipeline`` holds
# pipeline_tracking (seed 000 asks for a separate pipeline database).


DATABASE_URL = env_secret("DATABASE_URL")
DB_BEHIND_POOLER = env_bool("DB_BEHIND_POOLER")
# LISTEN needs a session of its own, which a transaction pooler does not keep: the connections
# that LISTEN (the runtime's, the web server's notification hub) go here, straight to the server.
DB_LISTEN_URL = env_secret("DB_LISTEN_URL")
if DB_BEHIND_POOLER and not DB_LISTEN_URL:
    raise ImproperlyConfigured(
        "DB_BEHIND_POOLER=1 needs DB_LISTEN_URL: a direct connection to the default database for LISTEN "
        "(through a transaction pooler, notifications are lost and workers wait for the safety sweep)"
    )
if DATABASE_URL:  # a URL without its password takes DATABASE_PASSWORD (or DATABASE_PASSWORD_FILE's)
    DATABASES = databases_from(
        DATABASE_URL, env_secret("PIPELINE_DATABASE_URL"), password=env_secret("DATABASE_PASSWORD")
    )
else:
    from pipeline_project.db import embedded as embedded_postgres

    DATABASES = embedded_postgres.database_settings()

# A migration waiting longer for a lock gives up (the queue's statements would wait behind it) and is tried again.
MIGRATION_LOCK_TIMEOUT_MS = env_number("MIGRATION_LOCK_TIMEOUT_MS", 500, int)
MIGRATION_LOCK_ATTEMPTS = env_number("MIGRATION_LOCK_ATTEMPTS", 60, int)

# Every process takes its connections to each database from one pool of its own
# (``pipeline_project.db.postgresql``): at most DB_POOL_SIZE, whatever its threads or slots. A thread
# borrows one for the time it uses it (a request, a run in a lane); the runtime's control loop and
# recorder keep theirs. Connections that LISTEN are apart (``DB_LISTEN_URL``).
DB_POOL_SIZE = env_number("DB_POOL_SIZE", 8, int)
DB_POOL_TIMEOUT_SEC = env_number("DB_POOL_TIMEOUT_SEC", 30)  # a thread waits this long for a free one
DB_POOL_MAX_IDLE_SEC = env_number("DB_POOL_MAX_IDLE_SEC", 60)  # a pool closes a connection idle this long
if DB_POOL_SIZE < 1:
    raise ImproperlyConfigured("DB_POOL_SIZE must be at least 1")
# A web worker's threads for synchronous views (web.handler): the pool's size, so no request waits for a connection.
WEB_THREADS = env_number("WEB_THREADS", DB_POOL_SIZE, int)
if WEB_THREADS < 1:
    raise ImproperlyConfigured("WEB_THREADS must be at least 1")
for _database in DATABASES.values():
    if _database["ENGINE"] == "django.db.backends.postgresql":
        _database["ENGINE"] = "pipeline_project.db.postgresql"
    _database["CONN_MAX_AGE"] = 0  # closing a connection gives it back to the pool
    _options = _database.setdefault("OPTIONS", {})
    _options["pool"] = {
        "min_size": 0,
        "max_size": DB_POOL_SIZE,
        "max_idle": DB_POOL_MAX_IDLE_SEC,
        "timeout": DB_POOL_TIMEOUT_SEC,
        "check": check_pooled_connection,
    }
    _options["application_name"] = os.environ.get("DB_APPLICATION_NAME", "pipeline-control")
    _options.setdefault("target_session_attrs", "read-write")  # of several hosts, the primary (db/urls.py)
    if DB_BEHIND_POOLER:
        # A transaction-pooling PgBouncer keeps neither server-side cursors nor (before 1.21, and
        # after it only with max_prepared_statements) prepared statements, and refuses startup
        # options: set jit on the database role there. prepare_threshold is Django's default,
        # stated because plain psycopg connections take these parameters too (theirs would be 5).
        _database["DISABLE_SERVER_SIDE_CURSORS"] = True
        _options["prepare_threshold"] = None
    else:
        # Parameters bound by the server, and statements run more than twice prepared: the
        # worker's claim/complete statements skip planning (about half their cost).
        _options["server_side_binding"] = True
        _options["prepare_threshold"] = 2
        # No JIT: compiling a short statement costs tens to hundreds of ms. Custom plans: a generic
        # plan of ?queue=no-such-queue walks all of dl_jobs (the worker's runtime keeps its own generic).
        _options["options"] = "-c jit=off -c plan_cache_mode=force_custom_plan"
    _database.setdefault("TEST", {})

DATABASE_ROUTERS = ["pipeline_project.db.routers.PipelineRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
FORMAT_MODULE_PATH = "pipeline_project.formats"  # times to the second, the zone stated

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True  # serve app static files even before collectstatic

LOGIN_URL = "admin:login"
CSRF_FAILURE_VIEW = "pipeline_project.web.error_views.csrf_failure"
# Paths (a prefix and everything under it) whose errors are JSON, whatever part of the stack
# answers them, and the builder of their body: ``build(code, message, details) -> dict``.
# Other paths (the admin, /pipeline) get Django's error pages.
JSON_ERROR_PATHS = {
    "/api/": "pipeline_project.api.errors.error_body",
    "/health": "pipeline_project.api.errors.error_body",
    "/status": "pipeline_project.api.errors.error_body",
    "/metrics": "pipeline_project.api.errors.error_body",
    "/sqlrs/": "jobs.dbstates.api.errors.sqlrs_error",  # sqlrs's ErrorResponse: details as text
}

# Requests with a larger body are refused with 413 before anything is parsed.
MAX_REQUEST_BODY_BYTES = env_number("MAX_REQUEST_BODY_BYTES", 5 * 1024 * 1024, int)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES

# --- REST API -------------------------------------------------------------------------
API_TOKEN_DEFAULT_SCOPES = ("read", "write")  # a new token's; operate is asked for (apitoken --scope)
# The shared API layer's way to the apps: the tokens' model; a key to its live token (marked used)
# or None; and whether a staff user may perform an operator action, ``(user, action name) -> bool``.
API_TOKEN_MODEL = "core.ApiToken"
API_TOKEN_AUTHENTICATE = "pipeline_project.core.services.api_token_authenticate"
API_OPERATOR_ACTION_ALLOWED = "pipeline_project.audit.actions.may"
# Arguments' keys whose values are secrets: masked for users without jobs.view_job_arguments.
SECRET_ARG_KEYS = env_list("SECRET_ARG_KEYS", "password,secret,token,api_key,apikey,access_key,private_key,credentials")
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "pipeline_project.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["pipeline_project.api.permissions.IsDaemonOrPermittedStaff"],
    "DEFAULT_PARSER_CLASSES": ["pipeline_project.api.parsers.StrictJSONParser"],
    # JSON only, and JSON even for a client that asks for HTML: staff browse the API in Swagger UI.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "pipeline_project.api.negotiation.JSONFallbackNegotiation",
    # OPTIONS answers 405: nothing uses DRF's self-description (the schema is the description).
    "DEFAULT_METADATA_CLASS": None,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "pipeline_project.api.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Pipeline control plane API",
    "DESCRIPTION": "Queue work, run it, track it per file and shard, and repair it.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    # Several "status" fields with different choices: each its own schema name.
    "ENUM_NAME_OVERRIDES": {
        "IngestionRunStatusEnum": "ingestion.models.RunStatus",
        "IngestionItemStatusEnum": "ingestion.models.ItemStatus",
        "JobStatusEnum": "jobs.queue.states.JobStatus",
    },
    # The schema and the docs need the same access as the API.
    "SERVE_PERMISSIONS": ["pipeline_project.api.permissions.IsDaemonOrPermittedStaff"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "pipeline_project.api.schema.document_error_responses",
    ],
}

# --- Jobs (seed 002) ------------------------------------------------------------------

DL_HEARTBEAT_SEC = env_number("DL_HEARTBEAT_SEC", 10)
REAPER_ALIVE_FILE = Path(os.environ.get("REAPER_ALIVE_FILE", "/tmp/pipeline-reaper.alive"))  # runreaper's pulse
REAPER_ALIVE_WITHIN_SEC = env_number("REAPER_ALIVE_WITHIN_SEC", 300)
DL_DEFAULT_LEASE_TTL_SEC = env_number("DL_DEFAULT_LEASE_TTL_SEC", 60, int)
DL_REAPER_PERIOD_SEC = env_number("DL_REAPER_PERIOD_SEC", 10)
DL_DEAD_WORKER_SEC = env_number("DL_DEAD_WORKER_SEC", 3)  # its LISTEN session closed, not beating: gone
DL_RETRY_BACKOFF_SEC = env_number("DL_RETRY_BACKOFF_SEC", 30)  # × attempt, after a failed run
DL_SWEEP_SEC = env_number("DL_SWEEP_SEC", 30)  # safety sweep for lost notifications
DL_SHUTDOWN_TIMEOUT_SEC = env_number("DL_SHUTDOWN_TIMEOUT_SEC", 30)
DL_CLAIM_BATCH = env_number("DL_CLAIM_BATCH", 100, int)  # most jobs one claim statement takes
DL_CLAIM_COALESCE_SEC = env_number("DL_CLAIM_COALESCE_SEC", 0.002)  # a busy queue waits this long to claim in bulk
DL_CLAIM_AHEAD_RUN_SEC = env_number("DL_CLAIM_AHEAD_RUN_SEC", 0.005)  # runs shorter: claims go ahead: worker.claiming
DL_CLAIM_FLOOR_AFTER_SEC = env_number("DL_CLAIM_FLOOR_AFTER_SEC", 0.02)  # slower reads of the head: worker.floors
DL_RECORD_LINGER_SEC = env_number("DL_RECORD_LINGER_SEC", 0.005)  # results wait this long to share a statement
DL_PROGRESS_INTERVAL_SEC = env_number("DL_PROGRESS_INTERVAL_SEC", 1.0)  # ctx.progress() writes at most this often
# The worker's own claims and results; "off" risks only re-running jobs after a database crash.
DL_WORKER_SYNCHRONOUS_COMMIT = os.environ.get("DL_WORKER_SYNCHRONOUS_COMMIT", "off")
DL_RETENTION_PERIOD_SEC = env_number("DL_RETENTION_PERIOD_SEC", 60)
DL_RETENTION_BUDGET_SEC = env_number("DL_RETENTION_BUDGET_SEC", 10)  # a run's batches stop here; the next goes on
DL_STATISTICS_CHECK_SEC = env_number("DL_STATISTICS_CHECK_SEC", 2)  # the planner's picture of dl_jobs kept up
# dl_jobs vacuumed at this many dead rows (each claim walks past those claimed since the last vacuum).
DL_VACUUM_CHECK_SEC = env_number("DL_VACUUM_CHECK_SEC", 10)
DL_VACUUM_DEAD_ROWS = env_number("DL_VACUUM_DEAD_ROWS", 100_000, int)
DL_COUNTS_FOLD_SEC = env_number("DL_COUNTS_FOLD_SEC", 10)  # the triggers' appended counts folded this often
DL_THROUGHPUT_RETENTION_DAYS = env_number("DL_THROUGHPUT_RETENTION_DAYS", 35)  # finished jobs per minute/hour, kept
DL_ERROR_SEARCH_HOURS = env_number("DL_ERROR_SEARCH_HOURS", 24)  # ?error= and error: read this window
DL_RETENTION_AGE_SEC = env_number("DL_RETENTION_AGE_SEC", 7 * 24 * 3600)
DL_RETENTION_MAX_IDENTICAL = env_number("DL_RETENTION_MAX_IDENTICAL", 100, int)
# Recurring schedules (jobs/schedules): how often a worker enqueues the ticks that are due, and how
# late a tick may be enqueued before it counts as missed (then its schedule's missed policy decides).
DL_SCHEDULES_CHECK_SEC = env_number("DL_SCHEDULES_CHECK_SEC", 1.0)
DL_SCHEDULES_GRACE_SEC = env_number("DL_SCHEDULES_GRACE_SEC", 60)
_DEFAULT_WORKERS = [{"queue": "default", "concurrency": 4}, {"queue": "sqlrs", "concurrency": 2}]
WORKERS_JSON = os.environ.get("WORKERS_JSON", json.dumps(_DEFAULT_WORKERS))
# runservice's worker (`make run`) when WORKERS_JSON is not set: the default's queues, and the queues
# and process namespace `manage.py demo` uses (pipeline_project.demo.config names them).
_DEMO_WORKERS = [{"queue": "demo-etl", "concurrency": 2}, {"queue": "demo-reports", "concurrency": 1}]
RUNSERVICE_WORKERS_JSON = json.dumps([*_DEFAULT_WORKERS, *_DEMO_WORKERS, {"namespace": "demo", "concurrency": 2}])
# Modules with @task handlers besides every installed app's job_handlers module; and the tasks
# (or patterns: reports.*) other services' workers run from dl_jobs. The API triggers no others.
JOBS_HANDLER_MODULES = env_list("JOBS_HANDLER_MODULES", "")
JOBS_EXTERNAL_TASKS = env_list("JOBS_EXTERNAL_TASKS", "")
# Modules that register process namespaces (``jobs.processes.namespaces.namespace``), besides
# every installed app's ``processors`` module. PROCESSOR_MODULES is its deprecated former name.
PROCESSES_HANDLER_MODULES = env_list("PROCESSES_HANDLER_MODULES", os.environ.get("PROCESSOR_MODULES", ""))
# A running task older than its namespace's step timeout plus this margin is a zombie.
PROC_ZOMBIE_MARGIN_SEC = float(os.environ.get("PROC_ZOMBIE_MARGIN_SEC", "30"))
PROC_ZOMBIE_PERIOD_SEC = float(os.environ.get("PROC_ZOMBIE_PERIOD_SEC", "10"))

# Ingestion (seed 004): the discover → download → ocr pipeline's jobs and limits.
INGESTION_QUEUE = os.environ.get("INGESTION_QUEUE", "default")
INGESTION_STORAGE_DIR = Path(os.environ.get("INGESTION_STORAGE_DIR", BASE_DIR / "var" / "ingestion"))
INGESTION_FETCH_TIMEOUT_SEC = float(os.environ.get("INGESTION_FETCH_TIMEOUT_SEC", "15"))
# Sent with every request, and the name robots.txt rules are matched against (its first word).
INGESTION_USER_AGENT = os.environ.get("INGESTION_USER_AGENT", "pipeline-control-plane/1 (ingestion)")
# Politeness: a new source's delay between its requests and its limit of concurrent fetches per host
# (each source can change both; a robots.txt Crawl-delay, up to INGESTION_MAX_CRAWL_DELAY_SEC, lengthens the delay).
INGESTION_CRAWL_DELAY_SEC = env_number("INGESTION_CRAWL_DELAY_SEC", 1.0)
INGESTION_MAX_CONCURRENT_PER_HOST = env_number("INGESTION_MAX_CONCURRENT_PER_HOST", 2, int)
INGESTION_MAX_CRAWL_DELAY_SEC = env_number("INGESTION_MAX_CRAWL_DELAY_SEC", 60)
# robots.txt is fetched once per host for this long (an unreachable one, 5xx, is asked again sooner).
INGESTION_ROBOTS_CACHE_SEC = env_number("INGESTION_ROBOTS_CACHE_SEC", 3600)
INGESTION_ROBOTS_RETRY_SEC = env_number("INGESTION_ROBOTS_RETRY_SEC", 60)
# A fetch holds one of its host's slots (renewed while it streams; a dead worker's lapses after this)
# and waits at most INGESTION_HOST_WAIT_SEC for one.
INGESTION_HOST_SLOT_TTL_SEC = env_number("INGESTION_HOST_SLOT_TTL_SEC", 60)
INGESTION_HOST_WAIT_SEC = env_number("INGESTION_HOST_WAIT_SEC", 600)
INGESTION_DOCUMENT_EXTENSIONS = (".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".gif", ".bmp", ".webp")
INGESTION_OCR_MAX_PAGES = int(os.environ.get("INGESTION_OCR_MAX_PAGES", "20"))
INGESTION_OCR_TIMEOUT_SEC = float(os.environ.get("INGESTION_OCR_TIMEOUT_SEC", "120"))
# The text quality gate: less text than this, or a smaller share of letters, needs review.
INGESTION_MIN_TEXT_CHARS = int(os.environ.get("INGESTION_MIN_TEXT_CHARS", "20"))
INGESTION_MIN_LETTER_SHARE = float(os.environ.get("INGESTION_MIN_LETTER_SHARE", "0.5"))
INGESTION_SETTLE_PERIOD_SEC = float(os.environ.get("INGESTION_SETTLE_PERIOD_SEC", "1"))

# Database states (the sqlrs engine on local PostgreSQL servers; jobs/dbstates).
SQLRS_STATE_STORE = Path(os.environ.get("SQLRS_STATE_STORE", VAR_DIR / "state-store"))
SQLRS_QUEUE = os.environ.get("SQLRS_QUEUE", "sqlrs")  # the job queue prepare jobs run on
SQLRS_IMAGE_BIN_DIRS = env_list("SQLRS_IMAGE_BIN_DIRS", "")  # more PostgreSQL installations (bin dirs)
SQLRS_OS_USER = os.environ.get("SQLRS_OS_USER", "sqlrs")  # servers run as this user when we run as root
SQLRS_LIQUIBASE_EXEC = os.environ.get("SQLRS_LIQUIBASE_EXEC", "")  # a Liquibase executable enables `lb` jobs
SQLRS_HEARTBEAT_SEC = env_number("SQLRS_HEARTBEAT_SEC", 5)  # a heartbeat log event after this long without psql output
SQLRS_MAX_STDIN_BYTES = env_number("SQLRS_MAX_STDIN_BYTES", 4 * 1024 * 1024, int)
SQLRS_MAX_SCRIPT_BYTES = env_number("SQLRS_MAX_SCRIPT_BYTES", 64 * 1024 * 1024, int)
SQLRS_CACHE_EVICT_PERIOD_SEC = env_number("SQLRS_CACHE_EVICT_PERIOD_SEC", 60)  # also after every built state
SQLRS_RECONCILE_PERIOD_SEC = env_number("SQLRS_RECONCILE_PERIOD_SEC", 30)  # prepare jobs whose queue job ended
# `-f` scripts are read by the engine (as the service's user): only from inside these directories.
SQLRS_SCRIPT_ROOTS = env_list("SQLRS_SCRIPT_ROOTS", f"{VAR_DIR / 'scripts'},/tmp")

DL_EVENTS_RECHECK_SEC = env_number("DL_EVENTS_RECHECK_SEC", 5)  # a follower re-reads this often without a NOTIFY
DL_EVENTS_MAX_FOLLOW_SEC = env_number("DL_EVENTS_MAX_FOLLOW_SEC", 3600)  # then the client resumes with ?after=

TASKS = {"default": {"BACKEND": "jobs.queue.tasks_backend.DatabaseBackend", "QUEUES": []}}

STATUS_SECTIONS = ["jobs.queue.selectors.status_section", "pipeline_project.core.selectors.kept_counts_section"]
METRICS_COLLECTORS = ["jobs.queue.worker.metrics.QueueDepthCollector"]
# With PROMETHEUS_MULTIPROC_DIR set, a process writes its metrics there from the first one made (at
# import): a directory not made yet crashed every process but the one that makes it (the web role).
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)

# --- Logging: one JSON object per line, with the request id, secrets masked (logging_config)
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO").upper()
LOGGING = logging_config(level=LOG_LEVEL)
