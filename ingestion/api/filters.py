import django_filters

from ingestion.models import IngestionItem, IngestionRun, ItemStage, ItemStatus, ItemType, RunStatus


class RunFilter(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=RunStatus.choices, help_text="Repeatable")
    source = django_filters.NumberFilter(field_name="source_id")

    class Meta:
        model = IngestionRun
        fields = []


class ItemFilter(django_filters.FilterSet):
    run = django_filters.UUIDFilter(field_name="run_id")
    source = django_filters.NumberFilter(field_name="source_id")
    stage = django_filters.ChoiceFilter(choices=ItemStage.choices)
    item_type = django_filters.ChoiceFilter(choices=ItemType.choices)
    status = django_filters.MultipleChoiceFilter(choices=ItemStatus.choices, help_text="Repeatable")
    needs_review = django_filters.BooleanFilter()

    class Meta:
        model = IngestionItem
        fields = []
