"""A node's network interfaces, read one way for both programs cockpit runs on nodes: the probe and the ssh
launcher's node agent. Per interface: name, up, loopback, mtu, mac, link speed, IPv4/IPv6 addresses with
their prefix (what NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME choose from), and whether it is virtual.

From `ip -j addr`; without iproute2, from sysfs plus each interface's primary IPv4 address by ioctl.

Stdlib only, and no import of cockpit: cockpit.launch.ssh.shell ships this source inside the node agent's
(one ``python3 -c`` program) to nodes where cockpit may not be installed, so the agent must not need it.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

SYS_NET = Path("/sys/class/net")


def interfaces() -> list[dict] | None:
    """Every interface of this node (see the module's docstring); None where neither iproute2 nor the
    kernel will list them."""
    try:
        out = subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True, timeout=5)
        data = json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        data = None
    if data is None:
        return sysfs_interfaces()
    return [{"name": d.get("ifname"), "up": "UP" in d.get("flags", ()) and d.get("operstate") != "DOWN",
             "loopback": "LOOPBACK" in d.get("flags", ()), "mtu": d.get("mtu"), "mac": d.get("address"),
             "speed_mbps": _speed(d.get("ifname")),
             "ipv4": [f"{a['local']}/{a['prefixlen']}" for a in d.get("addr_info", ()) if a.get("family") == "inet"],
             "ipv6": [f"{a['local']}/{a['prefixlen']}" for a in d.get("addr_info", ()) if a.get("family") == "inet6"],
             "virtual": is_virtual(d.get("ifname"))}
            for d in data]


def sysfs_interfaces() -> list[dict] | None:
    """The same facts without iproute2: names from the kernel, state from sysfs, the primary IPv4 address by
    ioctl (SIOCGIFADDR; no prefix length, no IPv6). None where the kernel will not list the interfaces."""
    import fcntl
    import struct

    try:
        names = socket.if_nameindex()
    except OSError:
        return None
    out = []
    for _, name in names:
        base = SYS_NET / name
        flags = _int(_read(base / "flags"), 16) or 0
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            ipv4 = [socket.inet_ntoa(packed[20:24])]
        except OSError:
            ipv4 = []
        out.append({"name": name, "up": bool(flags & 1), "loopback": bool(flags & 8),
                    "mtu": _int(_read(base / "mtu")), "mac": _read(base / "address"), "speed_mbps": _speed(name),
                    "ipv4": ipv4, "ipv6": [], "virtual": is_virtual(name)})
    return out


def is_virtual(name: str | None, sys_net: Path = SYS_NET) -> bool | None:
    """Whether ``name`` is a software interface (bridge, veth, tunnel, loopback): a NIC has a ``device`` link
    under /sys/class/net/NAME. None where sysfs does not list it (not Linux, another namespace's sysfs)."""
    base = sys_net / str(name)
    if not name or not base.exists():
        return None
    return not (base / "device").exists()


def _speed(name: str | None) -> int | None:
    """Link speed in Mbit/s; None where unknown (down, virtual: the kernel says -1 or refuses to read)."""
    speed = _int(_read(SYS_NET / str(name) / "speed"))
    return speed if speed and speed > 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int(text: str | None, base: int = 10) -> int | None:
    try:
        return int(text, base) if text is not None else None
    except ValueError:
        return None
