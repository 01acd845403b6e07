"""The timeline as an XSpace protobuf (`<host>.xplane.pb`), what TensorBoard's
profile plugin (xprof) reads: one plane per simulated device and one for the
host, each with a line of events (name, start, duration, stats).

The wire format is written directly (field numbers of tsl's xplane.proto):
  XSpace   {XPlane planes = 1; string hostnames = 4}
  XPlane   {int64 id = 1; string name = 2; XLine lines = 3;
            map<int64, XEventMetadata> event_metadata = 4;
            map<int64, XStatMetadata> stat_metadata = 5}
  XLine    {int64 id = 1; string name = 2; int64 timestamp_ns = 3; XEvent events = 4;
            string display_name = 11}
  XEvent   {int64 metadata_id = 1; int64 offset_ps = 2; int64 duration_ps = 3; XStat stats = 4}
  XEventMetadata {int64 id = 1; string name = 2}
  XStatMetadata  {int64 id = 1; string name = 2}
  XStat    {int64 metadata_id = 1; double double_value = 2; int64 int64_value = 4;
            string str_value = 5}"""
from __future__ import annotations

import struct


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _int(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n)


def _bytes(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _str(field: int, s: str) -> bytes:
    return _bytes(field, s.encode())


def _double(field: int, x: float) -> bytes:
    return _varint(field << 3 | 1) + struct.pack("<d", x)


class _Plane:
    def __init__(self, id: int, name: str):
        self.id, self.name = id, name
        self.lines: dict[str, list] = {}
        self.event_ids: dict[str, int] = {}
        self.stat_ids: dict[str, int] = {}

    def _meta(self, table: dict, name: str) -> int:
        if name not in table:
            table[name] = len(table) + 1
        return table[name]

    def add(self, line: str, name: str, start_ns: int, dur_ns: int, stats: dict):
        encoded = b""
        for key, value in stats.items():
            stat = _int(1, self._meta(self.stat_ids, key))
            if isinstance(value, bool) or isinstance(value, int):
                stat += _int(4, int(value))
            elif isinstance(value, float):
                stat += _double(2, value)
            else:
                stat += _str(5, str(value))
            encoded += _bytes(4, stat)
        self.lines.setdefault(line, []).append(
            (self._meta(self.event_ids, name), start_ns, dur_ns, encoded))

    def encode(self, origin_ns: int) -> bytes:
        out = _int(1, self.id) + _str(2, self.name)
        for k, (line, events) in enumerate(self.lines.items()):
            body = _int(1, k) + _str(2, line) + _str(11, line) + _int(3, origin_ns)
            for meta, start, dur, stats in events:
                body += _bytes(4, _int(1, meta) + _int(2, (start - origin_ns) * 1000)
                               + _int(3, dur * 1000) + stats)
            out += _bytes(3, body)
        for name, id in self.event_ids.items():
            out += _bytes(4, _int(1, id) + _bytes(2, _int(1, id) + _str(2, name)))
        for name, id in self.stat_ids.items():
            out += _bytes(5, _int(1, id) + _bytes(2, _int(1, id) + _str(2, name)))
        return out


# xprof shows device planes of known kinds only; the simulated CPU devices are
# XLA's "custom" devices there (a plane /device:CPU:n would be dropped).
_PLANE_KIND = {"cpu": "CUSTOM"}


def xspace(events: list, devices: list, hostname: str, start_ns: int) -> bytes:
    """The serialized XSpace of timeline `events` (`_core.pop_timeline` tuples):
    the host plane `/host:CPU` and a plane `/device:CUSTOM:<id>` per simulated
    device with a line `XLA Ops` of its primitives and collectives."""
    host = _Plane(0, "/host:CPU")
    planes = {d.id: _Plane(d.id + 1,
                           f"/device:{_PLANE_KIND.get(d.platform, d.platform.upper())}:{d.id}")
              for d in devices}
    for (name, category, device, start, dur, flops, bytes_accessed, axes, group, sent, received,
         args) in events:
        if category == "op":
            stats = {"flops": float(flops), "bytes_accessed": float(bytes_accessed)}
        elif category == "collective":
            stats = {"axes": ",".join(axes), "replica_group": ",".join(map(str, group)),
                     "bytes_sent": int(sent), "bytes_received": int(received)}
        else:
            stats = dict(args) if args else {}
        plane = host if device < 0 else planes.get(device)
        if plane is not None:
            plane.add("python3" if plane is host else "XLA Ops", name, start, dur, stats)
    origin = min([e[3] for e in events] + [start_ns])
    body = b"".join(_bytes(1, p.encode(origin)) for p in [host, *planes.values()])
    return body + _str(4, hostname)
