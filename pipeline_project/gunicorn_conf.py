"""gunicorn settings for the web server: ASGI, served by uvicorn workers.

    gunicorn -c pipeline_project/gunicorn_conf.py pipeline_project.asgi:application

Long-lived responses (event streams, process calls) wait on the event loop, not in a thread;
ordinary (synchronous) views run whole in one of the worker's WEB_THREADS threads, as under
WSGI (pipeline_project/web/handler.py).
"""

import os

from pipeline_project.web.uvicorn_worker import refuse_taken_addresses

# The service's address, and the probe port's if WEB_PROBE_BIND is set (settings.WEB_PROBE_PORT).
bind = [os.environ.get("WEB_BIND", "127.0.0.1:8000"), *filter(None, [os.environ.get("WEB_PROBE_BIND")])]
workers = int(os.environ.get("WEB_WORKERS", "2"))
worker_class = "pipeline_project.web.uvicorn_worker.UvicornWorker"  # a listening socket per worker
reuse_port = True  # so that each worker can bind its own beside the shared one
timeout = 120
graceful_timeout = int(os.environ.get("WEB_GRACEFUL_TIMEOUT", "10"))  # then open streams are cut
keepalive = 5  # idle between requests; a request's own bytes: WEB_REQUEST_READ_TIMEOUT (web/uvicorn_worker.py)
accesslog = None  # the application logs one JSON line per request
loglevel = os.environ.get("WEB_LOG_LEVEL", "warning")  # gunicorn's own lines; the application's are JSON
control_socket_disable = True  # no gunicornc control socket in the user's home


def on_starting(server):
    # With SO_REUSEPORT a second server on a taken port would share its connections, silently.
    refuse_taken_addresses(server.cfg.address)


def child_exit(server, worker):
    # A web worker that ended (a restart, a crash) takes its live gauges (open streams, ...) off
    # /metrics; its counters stay, summed as before. Files of a pid reused later start clean.
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
