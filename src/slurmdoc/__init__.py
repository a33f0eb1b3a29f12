"""slurmdoc: find the first real failure in a multi-node training log."""

__version__ = "0.1.0"
