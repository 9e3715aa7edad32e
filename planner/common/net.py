"""Addresses: whether a host a user names is this machine."""

from __future__ import annotations

import ipaddress
import re
import socket

# The forms of an IPv4 address that the C library also accepts (``127.1``, ``0x7f.1``,
# ``2130706433``): digits, hexadecimal and dots only.
_IPV4_SHORTHAND = re.compile(r"(?:0[xX][0-9a-fA-F]+|[0-9]+)(?:\.(?:0[xX][0-9a-fA-F]+|[0-9]+)){0,3}")


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` is this machine: ``localhost`` or a loopback address in any form a server
    binds to (``127.0.0.1``, ``127.1``, ``127.0.0.2``, ``::1``, ``[::1]``, ``0:0:0:0:0:0:0:1``,
    ``::ffff:127.0.0.1``). A name other than localhost is not resolved: it could name anything."""
    text = host.strip().strip("[]").rstrip(".").lower()
    if text == "localhost":
        return True
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        if not _IPV4_SHORTHAND.fullmatch(text):
            return False
        try:
            address = ipaddress.ip_address(socket.inet_aton(text))
        except (OSError, ValueError):
            return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
