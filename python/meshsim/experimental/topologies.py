"""`jax.experimental.topologies`: hardware descriptions to compile for without
the hardware (meshsim: TPU slices and GPU clusters with public specs)."""
from meshsim._src.topologies import (  # noqa: F401
    CHIPS, LINKS, ChipSpec, Interconnect, TopologyDescription, TopologyDevice, get_topology_desc)


def make_mesh(topo, mesh_shape, axis_names, axis_types=None):
    """A mesh of `topo`'s devices (row-major over its device order)."""
    from meshsim._src.sharding.api import make_mesh as _make_mesh
    return _make_mesh(mesh_shape, axis_names, axis_types, devices=topo.devices)
