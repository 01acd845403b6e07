"""Placeholder: replaced by the sharding work."""
def make_mesh(*a, **k): raise NotImplementedError
def set_mesh(*a, **k): raise NotImplementedError
def device_put(*a, **k): raise NotImplementedError
