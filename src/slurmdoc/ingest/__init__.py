"""Reading inputs and splitting them into per-rank streams of lines and events."""
