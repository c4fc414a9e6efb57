"""CLI sub-commands, one module per area."""
