"""Cross-cutting pieces shared by every app: API tokens, the error shape, request ids, health."""
