"""Model backends behind one protocol, chosen by a model string."""
