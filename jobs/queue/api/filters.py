import json

import django_filters
from django import forms

from jobs.queue import selectors
from jobs.queue.models import Job, JobStatus
from pipeline_project.api.masked_arguments import refuse_secret_search
from pipeline_project.db.storable import json_problem


class JSONObjectField(forms.CharField):
    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            parsed = json.loads(value)
        except ValueError:
            raise forms.ValidationError("Must be a JSON object.") from None
        if not isinstance(parsed, dict) or json_problem(parsed):
            raise forms.ValidationError("Must be a JSON object PostgreSQL can store.")
        return parsed


class JSONContainsFilter(django_filters.Filter):
    field_class = JSONObjectField

    def __init__(self, *args, **kwargs):
        super().__init__(*args, lookup_expr="contains", **kwargs)


class JobFilter(django_filters.FilterSet):
    queue = django_filters.CharFilter()
    task = django_filters.CharFilter()
    # distinct=False: a column of the row, no join to repeat it (DISTINCT sorted every page by every column).
    status = django_filters.MultipleChoiceFilter(
        choices=JobStatus.choices, distinct=False, help_text="Repeatable: ?status=failed&status=lost"
    )
    lock_key = django_filters.CharFilter()
    partition_key = django_filters.CharFilter()
    idempotency_key = django_filters.CharFilter()
    args = JSONContainsFilter(
        method="with_args",
        help_text='Jobs whose args contain this JSON object, e.g. {"source_id": 7}; naming a secret key '
        "(SECRET_ARG_KEYS) needs the permission to view arguments",
    )
    error = django_filters.CharFilter(
        method="with_error",
        help_text="Jobs whose error contains this text, among those created in the last DL_ERROR_SEARCH_HOURS (24)",
    )
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields = []

    def with_args(self, queryset, name, value):
        # A caller who sees the secrets masked may not find them by guessing either.
        refuse_secret_search(value, request=self.request)
        return queryset.filter(args__contains=value)

    def with_error(self, queryset, name, value):
        return selectors.jobs_with_error(queryset, text=value)
