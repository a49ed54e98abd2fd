"""TUN devices and TCP listeners created inside a namespace; the fds keep working from anywhere."""

from __future__ import annotations

import fcntl
import os
import socket
import struct

from netprobe.lab.netns import entered

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
LISTEN_BACKLOG = 4096


def open_tun(namespace: str, name: str) -> int:
    """A non-persistent TUN device in `namespace`: it disappears when this fd is closed."""
    with entered(namespace):
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), IFF_TUN | IFF_NO_PI))
        except OSError:
            os.close(fd)
            raise
    return fd


def open_listeners(namespace: str, device: str, port: int) -> list[socket.socket]:
    """TCP listeners on every address of `device`'s route (IPv4 and IPv6).

    SO_BINDTODEVICE ties each listener to the route's TUN, so two routes ending in the same
    datacenter namespace keep their own port sets (a port one route lacks still answers RST).
    """
    out: list[socket.socket] = []
    with entered(namespace):
        for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, device.encode())
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((addr, port))
                sock.listen(LISTEN_BACKLOG)
                sock.setblocking(False)
            except OSError:
                sock.close()
                raise
            out.append(sock)
    return out
