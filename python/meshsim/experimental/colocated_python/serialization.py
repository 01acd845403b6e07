"""`jax.experimental.colocated_python.serialization`: how colocated calls ship devices and
shardings. The simulator ships nothing; `DeviceList` names the sequence type its shardings
hold devices in, for code that annotates with it."""
DeviceList = tuple
