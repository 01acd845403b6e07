"""Meshes, partition specs, shardings and sharded placement (device_put)."""
