"""The pytest side of topology snapshots: settings, snapshot paths, recording, and what a test's outcome is.

Imported by :mod:`launchtrace.pytest_plugin` the first time a test uses ``launch_topology``, never at pytest's
start-up. Settings resolve keyword argument > ``[tool.launchtrace.snapshot]`` in the root's ``pyproject.toml``
> default. A snapshot is written only with ``--launchtrace-update`` or, for a missing one, when ``missing`` says
so (``"create"``, or ``"create-unless-ci"``: create locally, fail where the ``CI`` variable is set), and always
atomically (:func:`launchtrace.snapshot.write_atomic`), so two pytest-xdist workers never leave a torn file.

Example (``pyproject.toml``)::

    [tool.launchtrace.snapshot]
    missing = "create-unless-ci"
    ignore_streams = true
    float_tolerance = { dt = 1e-6 }
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from launchtrace.snapshot import (
    SnapshotError,
    SnapshotOptions,
    build_snapshot,
    compare,
    parse_snapshot,
    render_snapshot,
    write_atomic,
)

__all__ = ["MISSING_MODES", "Settings", "SnapshotSession", "load_settings"]

MISSING_MODES = ("fail", "create", "create-unless-ci")
_TABLE = "[tool.launchtrace.snapshot]"
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-\[\]]+")


@dataclasses.dataclass(frozen=True)
class Settings:
    """The session's snapshot settings (see the module docstring)."""

    directory: str = "__launchtrace__"
    missing: str = "fail"
    max_diff_lines: int = 20
    options: SnapshotOptions = dataclasses.field(default_factory=SnapshotOptions)


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise ValueError("reading it needs Python >= 3.11 or the tomli package") from None
    with open(path, "rb") as f:
        return tomllib.load(f)


def _check_bool(table: Mapping[str, Any], key: str, default: bool) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return value


def settings_from_table(table: Mapping[str, Any]) -> Settings:
    """:class:`Settings` from a ``[tool.launchtrace.snapshot]`` table; ``ValueError`` naming the bad key."""
    known = {"directory", "missing", "max_diff_lines", "ignore_scalars", "ignore_streams", "float_tolerance"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    directory = table.get("directory", Settings.directory)
    if not isinstance(directory, str) or not directory or os.path.isabs(directory) or ".." in Path(directory).parts:
        raise ValueError(f"directory must be a relative folder name, got {directory!r}")
    missing = table.get("missing", Settings.missing)
    if missing not in MISSING_MODES:
        raise ValueError(f"missing must be one of {', '.join(MISSING_MODES)}, got {missing!r}")
    lines = table.get("max_diff_lines", Settings.max_diff_lines)
    if not isinstance(lines, int) or isinstance(lines, bool) or lines < 1:
        raise ValueError(f"max_diff_lines must be an integer >= 1, got {lines!r}")
    tolerance = table.get("float_tolerance", {})
    if not isinstance(tolerance, Mapping):
        raise ValueError(f"float_tolerance must be a table of parameter name = tolerance, got {tolerance!r}")
    options = SnapshotOptions(
        ignore_scalars=_check_bool(table, "ignore_scalars", False),
        ignore_streams=_check_bool(table, "ignore_streams", False),
        float_tolerance=dict(tolerance),
    )
    return Settings(directory, missing, lines, options)


def load_settings(root: Path) -> Settings:
    """The settings of ``root/pyproject.toml`` (defaults when it or the table is absent); ``ValueError``
    naming the file and key when they are wrong."""
    path = root / "pyproject.toml"
    if not path.is_file():
        return Settings()
    try:
        data = _read_toml(path)
        table = data.get("tool", {}).get("launchtrace", {}).get("snapshot", {})
        if not isinstance(table, Mapping):
            raise ValueError("must be a table")
        return settings_from_table(table)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path} {_TABLE}: {exc}") from None


def _owner_locator(owners: Any) -> Any:
    """A locator over ``owners``: a ``{label: object}`` mapping (every array reachable from each object,
    labelled ``label.<path>``) or a :class:`~launchtrace.ownership.BufferSet`."""
    from launchtrace.ownership import BufferSet, buffers_of

    if owners is None or isinstance(owners, BufferSet):
        return owners
    if not isinstance(owners, Mapping) or not all(isinstance(k, str) for k in owners):
        raise TypeError(f"owners must be a mapping of label -> object or a BufferSet, got {type(owners).__name__}")
    return buffers_of(*owners.values(), root=list(owners)) if owners else None


class _Chain:
    """Locate in the first set that knows the pointer (owners taken at the block's start, then at its end)."""

    def __init__(self, *sets: Any) -> None:
        self.sets = [s for s in sets if s is not None]

    def locate(self, ptr: int) -> tuple[str, int] | None:
        for s in self.sets:
            found = s.locate(ptr)
            if found is not None:
                return found
        return None


class _Recording:
    """One ``with launch_topology(name):`` block: records the current thread's device work, then compares."""

    def __init__(self, session: SnapshotSession, request: pytest.FixtureRequest, name: str, **kwargs: Any) -> None:
        self.session, self.request, self.name = session, request, name
        self.owners = kwargs.pop("owners", None)
        self.kwargs = kwargs
        self._trace: Any = None
        self._before: Any = None

    def __enter__(self) -> _Recording:
        from launchtrace.testing import trace_launches

        self._before = _owner_locator(self.owners)
        self._trace = trace_launches()
        self._trace.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        trace, self._trace = self._trace, None
        trace.__exit__(exc_type, exc, tb)
        if exc_type is None:
            locator = _Chain(self._before, _owner_locator(self.owners))
            self.session.check(self.request, self.name, trace, locator, **self.kwargs)
        return False


class SnapshotSession:
    """Per pytest session: settings (read once, lazily), the snapshots used so far, and what was written."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.root = Path(config.rootpath)
        self.update = bool(config.getoption("launchtrace_update", False))
        self._settings: Settings | None = None
        self.used: dict[Path, str] = {}  # snapshot path -> the node id that used it in this session
        self.created: list[Path] = []
        self.updated: list[Path] = []
        self.stale: list[Path] = []

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            try:
                self._settings = load_settings(self.root)
            except ValueError as exc:
                pytest.fail(str(exc), pytrace=False)
        return self._settings

    @contextlib.contextmanager
    def instrumented(self) -> Iterator[None]:
        """Warp instrumented (shared with any ``trace_launches`` block, undone at the end if we did it)."""
        from launchtrace import testing

        testing._acquire_instrumentation()
        try:
            yield
        finally:
            testing._release_instrumentation()

    def recorder(self, request: pytest.FixtureRequest) -> Any:
        """The callable the ``launch_topology`` fixture returns."""

        def launch_topology(
            name: str,
            *,
            owners: Any = None,
            ignore_scalars: bool | None = None,
            ignore_streams: bool | None = None,
            float_tolerance: Mapping[str, float] | None = None,
        ) -> _Recording:
            if not isinstance(name, str) or not name or _UNSAFE.sub("", name) != name:
                raise ValueError(f"launch_topology: name must be non-empty [A-Za-z0-9._-] text, got {name!r}")
            return _Recording(
                self,
                request,
                name,
                owners=owners,
                ignore_scalars=ignore_scalars,
                ignore_streams=ignore_streams,
                float_tolerance=float_tolerance,
            )

        return launch_topology

    def path_for(self, request: pytest.FixtureRequest, name: str) -> Path:
        """``<test dir>/__launchtrace__/<test module>/<test name>.<name>.json`` (class tests: ``Class.test``)."""
        node = request.node
        test_file = Path(node.path)
        test_name = node.nodeid.split("::", 1)[1].replace("::", ".") if "::" in node.nodeid else node.name
        return (
            test_file.parent / self.settings.directory / test_file.stem / f"{_UNSAFE.sub('_', test_name)}.{name}.json"
        )

    def options(self, **overrides: Any) -> SnapshotOptions:
        base = self.settings.options
        tolerance = overrides.get("float_tolerance")
        return SnapshotOptions(
            ignore_scalars=base.ignore_scalars
            if overrides.get("ignore_scalars") is None
            else overrides["ignore_scalars"],
            ignore_streams=base.ignore_streams
            if overrides.get("ignore_streams") is None
            else overrides["ignore_streams"],
            float_tolerance={**base.float_tolerance, **(tolerance or {})},
        )

    def check(self, request: pytest.FixtureRequest, name: str, trace: Any, locator: Any, **overrides: Any) -> None:
        """Compare the recorded ``trace`` with the stored snapshot; write, fail or pass (module docstring)."""
        path = self.path_for(request, name)
        nodeid = request.node.nodeid
        if path in self.used:
            pytest.fail(
                f"launch_topology({name!r}): snapshot {self._show(path)} was already used in this session "
                f"(by {self.used[path]}); give each block its own name",
                pytrace=False,
            )
        self.used[path] = nodeid
        options = self.options(**overrides)
        try:
            doc = build_snapshot(
                trace.records, trace.scopes, name=name, owners=locator, root=self.root, source=nodeid, options=options
            )
        except SnapshotError as exc:
            pytest.fail(f"launch_topology({name!r}): {exc}", pytrace=False)
        text = render_snapshot(doc)
        if not path.exists():
            self._missing(path, nodeid, name, text)
            return
        stored_text = path.read_text(encoding="utf-8")
        try:
            stored = parse_snapshot(stored_text, self._show(path))
        except SnapshotError as exc:
            if self.update:
                write_atomic(path, text)
                self.updated.append(path)
                return
            pytest.fail(f"{exc}\nrewrite it with: {self._command(nodeid)}", pytrace=False)
        entries = compare(stored, doc, options)
        if self.update:
            if stored_text != text:
                write_atomic(path, text)
                self.updated.append(path)
            return
        if entries:
            from launchtrace.render.snapshot_text import mismatch_lines

            lines = mismatch_lines(
                entries,
                name=name,
                count_a=len(stored["launches"]),
                count_b=len(doc["launches"]),
                limit=self.settings.max_diff_lines,
            )
            pytest.fail(
                f"launch topology {name!r} differs from {self._show(path)}:\n  "
                + "\n  ".join(lines)
                + f"\nif the change is intended, update the snapshot with: {self._command(nodeid)}",
                pytrace=False,
            )
        if stored_text != text:
            self.stale.append(path)

    def _missing(self, path: Path, nodeid: str, name: str, text: str) -> None:
        mode = self.settings.missing
        if self.update or mode == "create" or (mode == "create-unless-ci" and not _ci()):
            write_atomic(path, text)
            self.created.append(path)
            return
        why = " (CI is set)" if mode == "create-unless-ci" else ""
        pytest.fail(
            f"launch topology snapshot {name!r} is missing{why}: {self._show(path)}\n"
            f"create it with: {self._command(nodeid)}",
            pytrace=False,
        )

    def _show(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    @staticmethod
    def _command(nodeid: str) -> str:
        return f"pytest --launchtrace-update '{nodeid}'"

    def summary_lines(self) -> list[str]:
        """What the session wrote, and the snapshots whose text is out of date though their topology holds."""
        lines = []
        if self.created or self.updated:
            lines.append(f"launchtrace: {len(self.created)} snapshot(s) written, {len(self.updated)} updated")
        if self.stale:
            shown = ", ".join(self._show(p) for p in self.stale[:5]) + (" ..." if len(self.stale) > 5 else "")
            lines.append(
                f"launchtrace: {len(self.stale)} snapshot(s) match in topology but differ in sites, scopes or "
                f"tolerated values: {shown} (refresh with --launchtrace-update)"
            )
        return lines
