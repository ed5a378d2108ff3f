"""Django's PostgreSQL backend, pointed at the embedded server, which starts on first use."""
