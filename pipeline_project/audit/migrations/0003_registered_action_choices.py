# The actions' and object types' choices are what the apps register (read when asked): no SQL.

import pipeline_project.audit.actions
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0002_operator_groups"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditentry",
            name="action",
            field=models.CharField(choices=pipeline_project.audit.actions.action_choices, max_length=40),
        ),
        migrations.AlterField(
            model_name="auditentry",
            name="object_type",
            field=models.CharField(choices=pipeline_project.audit.actions.object_type_choices, max_length=40),
        ),
    ]
