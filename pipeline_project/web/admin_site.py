"""The project's admin site: Django's, with "View site" leading to the operators' pages and every
list's actions refusing ids that are not its rows' (Django's own filter raises on them: a 500)."""

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.apps import AdminConfig
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect

NOT_IDS = "The selected rows were not this list's ({value!r} is no {model} id): nothing was done."


class SelectedIdsCheckedMixin:
    """An action's posted ids read as the model's keys before Django filters by them."""

    def response_action(self, request, queryset, **options):
        key = self.model._meta.pk
        for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
            try:
                key.to_python(value)
            except ValidationError:
                self.message_user(
                    request, NOT_IDS.format(value=value[:40], model=self.model._meta.verbose_name), messages.ERROR
                )
                return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset, **options)


class PipelineAdminSite(admin.AdminSite):
    site_url = "/pipeline/"  # "View site": the operators' pages (/ is the admin itself)

    def register(self, model_or_iterable, admin_class=None, **options):
        """Every ModelAdmin, the project's and Django's own (users, groups), with its actions' ids checked."""
        admin_class = admin_class or admin.ModelAdmin
        if not issubclass(admin_class, SelectedIdsCheckedMixin):
            admin_class = type(admin_class.__name__, (SelectedIdsCheckedMixin, admin_class), {})
        super().register(model_or_iterable, admin_class, **options)


class PipelineAdminConfig(AdminConfig):
    default_site = "pipeline_project.web.admin_site.PipelineAdminSite"
