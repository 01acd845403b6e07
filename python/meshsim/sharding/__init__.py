"""meshsim.sharding (placeholder)."""
