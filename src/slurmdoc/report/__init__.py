"""Renderers: one module per output format, each taking a Diagnosis."""
