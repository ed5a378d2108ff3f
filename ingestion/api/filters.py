import django_filters

from ingestion.models import IngestionItem, IngestionRun, ItemStage, ItemStatus, ItemType, RunStatus

PAGINATION_PARAMS = frozenset({"cursor", "page_size"})


class StrictFilterSet(django_filters.FilterSet):
    """Refuses query parameters it does not know (a 400 naming them): a misspelt filter must
    not answer every row as if it were not there."""

    def is_valid(self) -> bool:
        valid = super().is_valid()
        unknown = sorted(set(self.data) - set(self.filters) - PAGINATION_PARAMS)
        for name in unknown:
            self.form.errors[name] = self.form.error_class(["Unknown query parameter."])
        return valid and not unknown


class RunFilter(StrictFilterSet):
    status = django_filters.MultipleChoiceFilter(choices=RunStatus.choices, help_text="Repeatable")
    source = django_filters.NumberFilter(field_name="source_id")

    class Meta:
        model = IngestionRun
        fields = []


class ItemFilter(StrictFilterSet):
    run = django_filters.UUIDFilter(field_name="run_id")
    source = django_filters.NumberFilter(field_name="source_id")
    stage = django_filters.ChoiceFilter(choices=ItemStage.choices)
    item_type = django_filters.ChoiceFilter(choices=ItemType.choices)
    status = django_filters.MultipleChoiceFilter(choices=ItemStatus.choices, help_text="Repeatable")
    needs_review = django_filters.BooleanFilter()

    class Meta:
        model = IngestionItem
        fields = []
