"""Two groups for operators' accounts: read-only operators see every page of the pipeline's
systems and press nothing; operators may also perform every operator action and see
arguments' secret values. A staff user given a group gets what it holds."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

SYSTEMS = ["jobs", "processes", "schedules", "ingestion", "tracking", "dbstates", "audit"]
ACTION_PERMISSIONS = [
    ("jobs", "retry_job"),
    ("jobs", "cancel_job"),
    ("jobs", "delete_job"),
    ("jobs", "view_job_arguments"),
    ("jobs", "pause_queue"),
    ("jobs", "limit_queue"),
    ("schedules", "change_schedule"),
    ("schedules", "run_schedule"),
    ("ingestion", "add_ingestionrun"),
    ("ingestion", "cancel_ingestionrun"),
    ("processes", "repair_process"),
    ("tracking", "change_pipelinetracking"),
    ("dbstates", "change_preparejob"),
]
READ_ONLY, OPERATORS = "Read-only operators", "Operators"


def create_groups(apps, schema_editor):
    for app_config in apps.get_app_configs():  # the permissions exist before post_migrate makes them
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, using=schema_editor.connection.alias, apps=apps)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    views = Permission.objects.filter(content_type__app_label__in=SYSTEMS, codename__startswith="view_")
    views = views.exclude(codename="view_job_arguments")
    Group.objects.get_or_create(name=READ_ONLY)[0].permissions.set(views)
    actions = [Permission.objects.get(content_type__app_label=app, codename=code) for app, code in ACTION_PERMISSIONS]
    Group.objects.get_or_create(name=OPERATORS)[0].permissions.set([*views, *actions])


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=[READ_ONLY, OPERATORS]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("core", "0002_api_token_scopes"),
        ("jobs", "0014_operator_permissions"),
        ("processes", "0006_operator_permissions"),
        ("schedules", "0002_operator_permissions"),
        ("ingestion", "0006_operator_permissions"),
        ("tracking", "0005_no_vacuum_truncate"),
        ("dbstates", "0002_engine_host"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
