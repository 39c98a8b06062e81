"""Processes a program started under ``launchtrace run`` export like the program itself.

``os.fork`` and ``multiprocessing``'s ``fork`` children inherit the running export (the pipeline restarts
itself in the child). Children started with ``spawn`` or ``forkserver`` are fresh interpreters, so, as
``opentelemetry-instrument`` does, ``launchtrace run`` puts a folder holding a ``sitecustomize.py`` first on
``PYTHONPATH`` (:func:`export_to_children`) and writes its export settings into the environment. In each
child, :func:`install_in_child` waits for ``import warp`` (a meta path hook, so a child that never uses Warp
is not slowed) and then starts the export with those settings: same sink, same file (appended line by
line), same service name. The child's own launches are exported once, at its exit at the latest
(``multiprocessing`` children leave through ``sys.exit`` when spawned; a forkserver's forks flush from its
finalizers, see :mod:`launchtrace.export`).

Example::

    from launchtrace import autorun
    autorun.export_to_children(pipeline.config, {"value_stats": True})
    subprocess.run([sys.executable, "worker.py"])  # exports its Warp work too
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["AUTORUN_DIR", "LAUNCHTRACE_AUTORUN", "export_to_children", "install_in_child", "run_hidden_sitecustomize"]

AUTORUN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_autorun")
"""The folder with the ``sitecustomize.py`` that starts the export in child interpreters."""

LAUNCHTRACE_AUTORUN = "LAUNCHTRACE_AUTORUN"
"""Set to ``1`` in the environment of the processes ``launchtrace run`` starts; ``0`` turns the hook off."""


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def export_to_children(config: Any, settings: Mapping[str, Any], environ: dict[str, str] | None = None) -> None:
    """Make the Python processes started from now on export as ``config`` does.

    ``settings`` are the keyword settings the parent was started with: each is written to its environment
    variable (:data:`launchtrace.export.config.ENV`); the file sink's path is passed as ``LAUNCHTRACE_FILE``
    so the children append to the parent's file; the service name, when launchtrace chose it, too.
    """
    from launchtrace.export import config as cfg

    env = os.environ if environ is None else environ
    for name, value in settings.items():
        variables = cfg.ENV.get(name)
        if variables and value is not None and name != "file_path":
            env[variables[0][0]] = _env_text(value)
    if config.sink == "file":
        env[cfg.LAUNCHTRACE_FILE] = config.file_path
    if config.service_name and cfg.LAUNCHTRACE_SERVICE_NAME not in env:
        env[cfg.LAUNCHTRACE_SERVICE_NAME] = config.service_name
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != AUTORUN_DIR]
    env["PYTHONPATH"] = os.pathsep.join([AUTORUN_DIR, *paths])
    env[LAUNCHTRACE_AUTORUN] = "1"


class _StartOnWarpImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``warp`` is about to be imported, it wraps the real loader so the export
    starts right after Warp's module has run, then removes itself."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if fullname != "warp":
            return None
        _remove_hook()
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        _start_export()

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...: the real loader's
        return getattr(self._inner, name)


_hook = _StartOnWarpImport()
_hook_lock = threading.Lock()


def _remove_hook() -> None:
    with _hook_lock:
        if _hook in sys.meta_path:
            sys.meta_path.remove(_hook)


def _start_export() -> None:
    try:
        from launchtrace.export import start_export

        start_export()
    except Exception as exc:  # a bad setting or an unwritable file: the child's program still runs
        sys.stderr.write(f"launchtrace: could not start the export in process {os.getpid()}: {exc}\n")


def install_in_child(environ: Mapping[str, str] | None = None) -> bool:
    """In a process ``launchtrace run`` started: export once it imports Warp (at once if it already did).

    Returns whether the hook is active (``LAUNCHTRACE_AUTORUN=1``)."""
    env = os.environ if environ is None else environ
    if env.get(LAUNCHTRACE_AUTORUN, "").strip() != "1":
        return False
    if "warp" in sys.modules:
        _start_export()
        return True
    with _hook_lock:
        if _hook not in sys.meta_path:
            sys.meta_path.insert(0, _hook)
    return True


def run_hidden_sitecustomize(own_dir: str) -> None:
    """Run the ``sitecustomize`` module that ours shadows on ``sys.path`` (the environment's own), if any."""
    search = [p for p in sys.path if os.path.abspath(p or os.curdir) != own_dir]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", search)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)
