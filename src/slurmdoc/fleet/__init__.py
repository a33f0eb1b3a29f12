"""Many jobs at once: group log files by job, diagnose each job on its own, report on them together."""
