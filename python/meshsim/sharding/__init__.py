"""meshsim.sharding: meshes, partition specs and shardings (as `jax.sharding`)."""
from meshsim._src.sharding.mesh import (  # noqa: F401
    AbstractDevice, AbstractMesh, AxisType, Mesh, get_abstract_mesh, get_mesh, set_mesh,
    use_abstract_mesh)
from meshsim._src.sharding.named_sharding import (  # noqa: F401
    NamedSharding, Sharding, SingleDeviceSharding, make_single_device_sharding)
from meshsim._src.sharding.partition_spec import PartitionSpec  # noqa: F401
from meshsim._src.sharding.array import ManualAxisType  # noqa: F401
from meshsim._src.sharding.explicit import (  # noqa: F401
    ShardingTypeError, auto_axes, explicit_axes, reshard)
from meshsim._src.sharding.placements import (  # noqa: F401
    Partial, Placement, Replicate, Shard, from_placements, placements)
