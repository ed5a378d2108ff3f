"""Seed 000: per-file, per-shard stage tracking (pipeline_tracking) and its daemon API."""
