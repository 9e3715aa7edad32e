"""Addresses: whether a host a user names is this machine."""

from __future__ import annotations

import ipaddress
import re
import socket

from planner.common.text import shown
from planner.errors import UsageError

# A name or address to listen on: letters, digits and the separators of DNS names and of IPv4
# and IPv6 addresses (``[::1]``, ``fe80::1%eth0``), at most a DNS name's 253 characters.
_LISTEN_ADDRESS = re.compile(r"[A-Za-z0-9.\-:\[\]%_]{1,253}")

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


def check_listen_host(host: str, option: str = "--host", example: str = "127.0.0.1") -> str:
    """``host`` when it can be an address to listen on (a name or an IP address, at most 253
    characters), else a :class:`UsageError` naming ``option``."""
    if not _LISTEN_ADDRESS.fullmatch(host):
        raise UsageError(
            f"{option} {shown(host)}: expected a host name or an IP address (at most 253 "
            f"letters, digits and . - : [ ] %), such as {example}"
        )
    return host
