"""Database routing: the tracking app lives on the ``pipeline`` alias, everything else on ``default``."""

PIPELINE_APPS = frozenset({"tracking"})


class PipelineRouter:
    def _alias(self, app_label: str) -> str:
        return "pipeline" if app_label in PIPELINE_APPS else "default"

    def db_for_read(self, model, **hints):
        return self._alias(model._meta.app_label)

    def db_for_write(self, model, **hints):
        return self._alias(model._meta.app_label)

    def allow_relation(self, obj1, obj2, **hints):
        return self._alias(obj1._meta.app_label) == self._alias(obj2._meta.app_label)

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db == self._alias(app_label)
