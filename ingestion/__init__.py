"""Seed 004: ingestion runs and their items, the /pipeline pages, and the discover -> download -> ocr job handlers."""
