"""Model backends behind one interface (``Backend.run`` over a batch of requests)."""
