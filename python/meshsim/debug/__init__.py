"""meshsim.debug (placeholder)."""
