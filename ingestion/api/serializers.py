from rest_framework import serializers

from ingestion.models import IngestionItem, IngestionRun, ItemStage, ItemStatus, ItemType, RunStage, RunStatus
from ingestion.services import MAX_ITEMS_PER_CALL
from pipeline_project.api.fields import QueryIntegerField
from pipeline_project.api.serializers import PageQuery, RequestSerializer

BIGINT_MAX = 2**63 - 1


class RunSerializer(serializers.ModelSerializer):
    source_id = serializers.IntegerField()
    source_name = serializers.CharField(source="source.name")

    class Meta:
        model = IngestionRun
        fields = [
            "id",
            "source_id",
            "source_name",
            "status",
            "active_stage",
            "error_message",
            "stats_json",
            "manual",
            "created_at",
            "started_at",
            "finished_at",
            "updated_at",
        ]


class RunListQuery(PageQuery):
    status = serializers.MultipleChoiceField(choices=RunStatus.choices, required=False, help_text="Repeatable")
    source = QueryIntegerField(required=False, max_value=BIGINT_MAX)


class ItemListQuery(PageQuery):
    run = serializers.UUIDField(required=False)
    source = QueryIntegerField(required=False, max_value=BIGINT_MAX)
    stage = serializers.ChoiceField(choices=ItemStage.choices, required=False)
    item_type = serializers.ChoiceField(choices=ItemType.choices, required=False)
    status = serializers.MultipleChoiceField(choices=ItemStatus.choices, required=False, help_text="Repeatable")
    needs_review = serializers.BooleanField(allow_null=True, default=None)


class RunCreateSerializer(RequestSerializer):
    source_id = serializers.IntegerField(min_value=1, max_value=2**63 - 1)
    manual = serializers.BooleanField(default=False)


class RunUpdateSerializer(RequestSerializer):
    """The seed's run-level update (section 9); fields left out are kept, at least one is given."""

    status = serializers.ChoiceField(choices=RunStatus.choices, required=False)
    active_stage = serializers.ChoiceField(choices=RunStage.choices, required=False)
    error_message = serializers.CharField(required=False, allow_blank=True, max_length=10_000)
    stats_json = serializers.DictField(required=False)
    finished_at = serializers.DateTimeField(required=False)

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError(f"Give at least one of {', '.join(self.fields)}.")
        return attrs


class ItemSerializer(serializers.ModelSerializer):
    run_id = serializers.UUIDField()
    source_id = serializers.IntegerField()

    class Meta:
        model = IngestionItem
        exclude = ["run", "source"]


class ItemsUpsertSerializer(RequestSerializer):
    """One item (an object with the seed's columns), or ``{"items": [...]}``. The envelope is
    checked here; each item's fields, unknown ones included, by the service's rules."""

    items = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=MAX_ITEMS_PER_CALL)

    def to_internal_value(self, data):
        if isinstance(data, dict) and "items" not in data:
            data = {"items": [data]}  # one item
        return super().to_internal_value(data)


class UpsertedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    item_key = serializers.CharField()
    created = serializers.BooleanField()


class UpsertResultSerializer(serializers.Serializer):
    items = UpsertedSerializer(many=True)
