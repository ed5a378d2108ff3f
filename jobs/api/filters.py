import django_filters

from jobs.models import Job, JobStatus


class JobFilter(django_filters.FilterSet):
    queue = django_filters.CharFilter()
    task = django_filters.CharFilter()
    status = django_filters.MultipleChoiceFilter(
        choices=JobStatus.choices, help_text="Repeatable: ?status=failed&status=lost"
    )
    lock_key = django_filters.CharFilter()
    partition_key = django_filters.CharFilter()
    idempotency_key = django_filters.CharFilter()
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields = []
