import django.contrib.postgres.fields
from django.db import migrations, models

import pipeline_project.core.models

SCOPE_CHOICES = [("read", "read"), ("write", "write"), ("operate", "operate")]
HELP = "What the token may do: read (GET), write (what daemons do), operate (operators' actions)."


class Migration(migrations.Migration):
    """Tokens get scopes. Those made before had the whole API, and keep it: all three."""

    dependencies = [("core", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="scopes",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.TextField(choices=SCOPE_CHOICES), default=["read", "write", "operate"], help_text=HELP
            ),
        ),
        migrations.AlterField(
            model_name="apitoken",
            name="scopes",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.TextField(choices=SCOPE_CHOICES),
                default=pipeline_project.core.models.default_scopes,
                help_text=HELP,
            ),
        ),
        migrations.AddConstraint(
            model_name="apitoken",
            constraint=models.CheckConstraint(
                condition=models.Q(("scopes__contained_by", ["read", "write", "operate"]), ("scopes__len__gt", 0)),
                name="api_tokens_scopes_known",
            ),
        ),
    ]
