"""The console's time filters (``{% load job_times %}``): ``pipeline_project.web.times``."""

from django import template

from pipeline_project.web.times import ago, duration, seconds

register = template.Library()
register.filter(ago)
register.filter(duration)
register.filter(seconds)
