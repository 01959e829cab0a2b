"""Optional extras (pyproject `[project.optional-dependencies]`), imported only where a command uses them.

One place for the install hint, so `measure campaign --ray` and `planner plan --ray` say the same thing, and
for the bounded check that a Ray cluster's address answers before ray.init is asked to connect to it.
"""

from __future__ import annotations

import importlib
import socket
from types import ModuleType
from urllib.parse import urlsplit

from fleetfacts.errors import FleetplanError, InputError

RAY_INSTALL_HINT = "pip install '.[ray]' (or: pip install 'ray[default]>=2.9')"
# How long a --ray cluster address gets to accept a TCP connection: ray.init retried an unreachable one for a
# minute and more (issue 47); a head on the same network answers in milliseconds.
RAY_CONNECT_TIMEOUT_S = 5.0
# The port ray.init connects to when an address names none: the head's GCS (ray start --port) or, for ray://,
# the Ray Client server (ray start --ray-client-server-port); both are Ray's documented defaults.
RAY_GCS_PORT = 6379
RAY_CLIENT_PORT = 10001
RAY_CLIENT_SCHEME = "ray://"
# Addresses ray.init resolves itself (auto: a cluster started on this machine; local: one it starts): not checked.
RAY_NAMED_ADDRESSES = ("auto", "local")


class MissingExtra(FleetplanError, ImportError):
    """An optional package a command needs is not installed; the message says how to install it."""


class RayUnreachable(FleetplanError, ConnectionError):
    """Nothing answers at a --ray cluster address within RAY_CONNECT_TIMEOUT_S."""


def import_ray() -> ModuleType:
    """The `ray` module; MissingExtra with the install hint when it is absent."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise MissingExtra(f"--ray needs Ray, which is not installed: {RAY_INSTALL_HINT}") from None


def check_ray_address(address: str) -> None:
    """Return once `address` (host:port, host, or ray://host[:port]) accepts a TCP connection; RayUnreachable after
    at most RAY_CONNECT_TIMEOUT_S otherwise, InputError when it names no host or a bad port.  auto and local pass."""
    if address in RAY_NAMED_ADDRESSES:
        return
    host, port = _ray_host_port(address)
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        socket.create_connection((host, port), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except OSError as err:  # refused, timed out, no route, unknown host
        raise RayUnreachable(f"--ray {address}: no Ray cluster answers at {shown} within {RAY_CONNECT_TIMEOUT_S:g} s "
                             f"({err.strerror or err}): start its head there (ray start --head), check the address, "
                             "or pass --ray local") from None


def _ray_host_port(address: str) -> tuple[str, int]:
    client = address.startswith(RAY_CLIENT_SCHEME)
    parts = urlsplit("//" + address.removeprefix(RAY_CLIENT_SCHEME))
    try:
        port = parts.port or (RAY_CLIENT_PORT if client else RAY_GCS_PORT)
    except ValueError:  # not a number, or past 65535
        port = 0
    if not parts.hostname or not port:
        raise InputError(f"--ray {address}: expected a cluster address (host:port, ray://host:port), auto or local")
    return parts.hostname, port
