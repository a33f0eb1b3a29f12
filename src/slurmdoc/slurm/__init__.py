"""Slurm integration: sacct records, exit-code meanings, log location, the epilog hook."""
