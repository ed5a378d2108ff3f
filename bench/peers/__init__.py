"""The peer queues bench/queue_peers.py runs beside ours: a no-op task each, nothing else."""
