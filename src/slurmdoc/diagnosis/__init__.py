"""From classified events to one diagnosis: layout, causal ordering, remediation."""
