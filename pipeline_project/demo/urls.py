from django.urls import path

from pipeline_project.demo import views

app_name = "demo"

urlpatterns = [
    path("site/", views.site_file, name="site-index"),
    path("site/<path:path>", views.site_file, name="site-file"),
]
