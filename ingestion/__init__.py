"""Seed 004: ingestion runs and items, the /pipeline pages and the reference handlers.

Not built yet; the app is installed so its migrations and pages have a home.
"""
