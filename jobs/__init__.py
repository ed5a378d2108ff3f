"""Seed 002 job queue (dl_jobs) with runworker and the reaper; seed 001/003 conventions."""
