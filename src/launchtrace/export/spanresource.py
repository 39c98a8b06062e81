"""The resource every exported span is reported under, built once per exporter.

``service.name`` and anything in ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` come from the SDK's
``Resource.create()`` (so they mean what they mean for any OpenTelemetry program, and win over our defaults);
we add host, process, Warp and launchtrace versions and the Warp device names. The result is a plain
attribute tuple shared by all spans: the span model carries no SDK objects.

Example::

    from launchtrace.export.spanresource import build_resource
    print(dict(build_resource(service_name="sim"))["service.name"])  # sim
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import sys
from importlib import metadata
from typing import Any

from opentelemetry.sdk.resources import Resource

from launchtrace import __version__
from launchtrace import conventions as C

__all__ = ["build_resource", "warp_devices", "warp_version", "with_pid"]

_log = logging.getLogger(__name__)


def warp_version() -> str:
    """The installed Warp version, without importing Warp (``""`` when it is not installed)."""
    warp = sys.modules.get("warp")
    version = getattr(getattr(warp, "config", None), "version", None)
    if isinstance(version, str):
        return version
    try:
        return metadata.version("warp-lang")
    except metadata.PackageNotFoundError:
        return ""


def warp_devices() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(aliases, names) of Warp's devices, only when the program already imported and initialised Warp."""
    warp = sys.modules.get("warp")
    context = sys.modules.get("warp.context") or sys.modules.get("warp._src.context")
    runtime = getattr(context, "runtime", None)
    if warp is None or runtime is None:
        return (), ()
    try:
        devices = warp.get_devices()
    except (RuntimeError, AttributeError) as exc:
        _log.warning("could not list Warp devices for the resource: %s", exc)
        return (), ()
    return tuple(d.alias for d in devices), tuple(str(d.name) for d in devices)


def build_resource(
    service_name: str | None = None, extra: dict[str, Any] | None = None, provider_resource: Any = None
) -> tuple:
    """The resource attributes: our defaults overridden by the environment, overridden by ``service_name``.

    ``provider_resource`` (a ``TracerProvider``'s SDK ``Resource``) replaces the environment's: it already
    holds what its owner chose, so our defaults only fill what it leaves out."""
    base: dict[str, Any] = {
        "host.name": socket.gethostname(),
        "host.arch": platform.machine(),
        "os.type": sys.platform,
        "process.pid": os.getpid(),
        "process.executable.name": os.path.basename(sys.executable or "python"),
        "process.runtime.name": sys.implementation.name,
        "process.runtime.version": platform.python_version(),
        C.RESOURCE_LAUNCHTRACE_VERSION: __version__,
    }
    version = warp_version()
    if version:
        base[C.RESOURCE_WARP_VERSION] = version
    aliases, names = warp_devices()
    if aliases:
        base[C.RESOURCE_DEVICES] = aliases
        base[C.RESOURCE_DEVICE_NAMES] = names
    base.update(extra or {})
    override = {"service.name": service_name} if service_name else {}
    if provider_resource is not None:
        resource = Resource(base).merge(provider_resource).merge(Resource(override))
    else:
        resource = Resource(base).merge(Resource.create(override))
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in resource.attributes.items())


def with_pid(resource: tuple, pid: int) -> tuple:
    """``resource`` for a forked child: the same attributes, ``process.pid`` replaced (no detector runs)."""
    return tuple(("process.pid", pid) if key == "process.pid" else (key, value) for key, value in resource)
