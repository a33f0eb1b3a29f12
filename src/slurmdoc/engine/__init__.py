"""The rule engine: rule schema, loading and validation, matching, example self-test."""
