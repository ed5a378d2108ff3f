# Everything a newcomer needs: `make run` (service) and `make test` (suite).
PYTHON ?= $(shell command -v python3.13 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed-requirements

.PHONY: install setup run demo test test-image image lock compose-secrets lint docs api-reference bench-tracking bench-jobs bench-peers bench-costs bench-ablation bench-processes bench-ingestion bench-dbstates bench-fleet bench-web bench-big bench-shapes bench-worker-size bench-chaos bench-upgrade db-stop clean

$(INSTALLED): requirements.txt requirements/service.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $(INSTALLED)

install: $(INSTALLED)

# Databases (embedded PostgreSQL unless DATABASE_URL is set), migrations, admin login, static files.
setup: install
	$(BIN)/python manage.py ensuredatabases
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py migrate --noinput --database pipeline
	$(BIN)/python manage.py ensureadmin
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0

# Web server (ASGI) and a job worker in the foreground; Ctrl-C stops both and exits 0.
run: setup
	$(BIN)/python manage.py runservice

# The demo (docs/getting-started.md), in the databases `make run` uses; its worker runs it.
# Idempotent; DEMO_ARGS="--remove" takes it away, DEMO_ARGS="--base-url http://HOST:PORT" if not on WEB_BIND.
demo: setup
	$(BIN)/python manage.py demo $(DEMO_ARGS)

# The suite in TEST_WORKERS processes (pytest-xdist), each with test databases and temp dirs of its
# own (an end-to-end test's servers and workers use its worker's databases, so two meet nothing).
TEST_WORKERS ?= 4
test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist load $(PYTEST_ARGS)

# The container images with podman (deploy/image/build): the service's and the database-state
# engine's, on a Debian base made locally (deploy/image/make-base) unless BASE_IMAGE names one.
image:
	deploy/image/build
	deploy/image/build --target engine

# The images' tests (CI's image step): every role under podman against the PostgreSQL at
# IMAGE_TEST_DATABASE_SERVER (postgres://postgres@127.0.0.1:5432), and the Kubernetes manifests played.
test-image: install image
	$(BIN)/python -m pytest -m image -p no:xdist tests/image $(PYTEST_ARGS)

# requirements/service.lock, what the image installs: every package pinned, with its hashes.
lock: install
	$(BIN)/pip-compile --quiet --generate-hashes --no-emit-index-url --strip-extras --allow-unsafe \
		--output-file requirements/service.lock requirements/service.txt

# docker-compose.yml's secrets (var/secrets/: the database password and SECRET_KEY), made once. The
# directory is its owner's alone; the files are readable, as the containers' user (uid 10001) reads them.
compose-secrets:
	@mkdir -p var/secrets && chmod 700 var/secrets
	@for name in db_password secret_key; do \
		test -s var/secrets/$$name || (umask 022 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > var/secrets/$$name); \
	done
	@echo "var/secrets/db_password and var/secrets/secret_key are there"

# The linter and the formatter, as CI runs them (settings in pyproject.toml).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The manual (docs/, MkDocs Material) on http://127.0.0.1:8001, its API reference generated first.
docs: api-reference
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:8001

# The API reference's schema, as the service serves it at /api/v1/schema (the suite checks it is current).
api-reference: install
	$(BIN)/python manage.py spectacular --file docs/api/openapi.yaml

bench-tracking: install
	$(BIN)/python bench/tracking_api.py $(BENCH_ARGS)

bench-jobs: install
	$(BIN)/python bench/jobs_queue.py $(BENCH_ARGS)

bench-processes: install
	$(BIN)/python bench/processes.py $(BENCH_ARGS)

bench-ingestion: install
	$(BIN)/python bench/ingestion_upsert.py $(BENCH_ARGS)

bench-dbstates: install
	$(BIN)/python bench/dbstates.py $(BENCH_ARGS)

# 30 runworkers and a 4-worker web server through PgBouncer on a max_connections=100 server of its
# own (Debian's postgresql and pgbouncer), beside 2 runworkers.
bench-fleet: install
	$(BIN)/python bench/fleet.py $(BENCH_ARGS)

# The job queue beside pgqueuer and procrastinate (their packages only in the bench's venv).
bench-peers: install
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r bench/requirements-peers.txt
	$(BIN)/python bench/queue_peers.py $(BENCH_ARGS)

# Where the time goes per drained job, ours beside pgqueuer: statements, transactions, CPU, WAL,
# rows written, on a scratch server with pg_stat_statements (Debian's postgresql).
bench-costs: install
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r bench/requirements-peers.txt
	$(BIN)/python bench/drain_costs.py $(BENCH_ARGS)

bench-ablation: install
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r bench/requirements-peers.txt
	$(BIN)/python bench/drain_ablation.py $(BENCH_ARGS)

# The web tier: seven endpoints under the deployed server beside a threaded WSGI twin (and FastAPI).
bench-web: install
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r bench/requirements-peers.txt
	$(BIN)/python bench/web_tier.py $(BENCH_ARGS)

# Every admin page, /pipeline page and API read at 50,000 jobs, then at a year in production's size
# (10M jobs, 40M job events, ...; seeded in SQL into big_control / big_pipeline; BENCH_ARGS="--scale 0.02").
bench-big: install
	$(BIN)/python bench/big_tables.py $(BENCH_ARGS)

# The jobs dashboard, queues page and job lists on jobs of four other shapes (spread, few-queues,
# failed-history, recent), at 50,000 jobs and at 3,000,000 (BENCH_ARGS="--jobs 500000 --shape recent").
bench-shapes: install
	$(BIN)/python bench/job_shapes.py $(BENCH_ARGS)

# Faults at a production rate (restart, kills, held xmin, a frozen worker, ...), on a cluster of its own.
bench-chaos: install
	$(BIN)/python bench/chaos.py $(BENCH_ARGS)

# A release rolled out under load: the previous release's fleet, this release's migrations and fleet, the old stopped.
bench-upgrade: install
	$(BIN)/python bench/upgrade.py $(BENCH_ARGS)

# The worker on those tables (after bench-big): drain and pickup beside an empty database, retention under churn.
bench-worker-size: install
	$(BIN)/python bench/worker_at_size.py $(BENCH_ARGS)

# Stop any database-state server left running under var/state-store, then the embedded PostgreSQL
# (both keep running between commands otherwise).
db-stop: install
	$(BIN)/python manage.py sqlrsservers stop
	$(BIN)/python manage.py embeddedpg stop

clean: db-stop
	rm -rf $(VENV) staticfiles
