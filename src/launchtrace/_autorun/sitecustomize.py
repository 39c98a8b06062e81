# ruff: noqa: UP031, UP036 - this file must parse in every Python a child may run (2.7 included)
"""Python runs this at start in every process ``launchtrace run`` starts (its folder is put on ``PYTHONPATH``).

In an interpreter launchtrace supports (Python 3.10 or newer) it installs :mod:`launchtrace.autorun`'s hook,
which starts the export when the process imports Warp (a ``multiprocessing`` child started with ``spawn`` or
``forkserver``, a ``subprocess`` running Python). In every interpreter, supported or not (a Python 2.7 or 3.6
child reaches this file too), it then runs the ``sitecustomize`` this one hides, if any, so the environment's
own start-up code still runs. So this file is written in the Python both 2.7 and 3 parse: no f-strings, no
annotations. Kept tiny: a process that never imports Warp pays for one small import.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _run_hidden_sitecustomize():
    """Run the ``sitecustomize`` next on ``sys.path`` after this folder (the environment's own), in any Python."""
    search = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    try:
        from importlib.machinery import PathFinder
        from importlib.util import module_from_spec
    except ImportError:  # Python 2
        import imp

        try:
            found = imp.find_module("sitecustomize", search)
        except ImportError:
            return
        try:
            imp.load_module("sitecustomize", *found)
        finally:
            if found[0] is not None:
                found[0].close()
        return
    spec = PathFinder.find_spec("sitecustomize", search)
    if spec is None or spec.loader is None:
        return
    module = module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if sys.version_info >= (3, 10):
    try:
        try:
            import launchtrace.autorun as _autorun
        except ImportError:  # launchtrace came from the parent's sys.path: the folder above this package's
            sys.path.append(os.path.dirname(os.path.dirname(_here)))
            import launchtrace.autorun as _autorun
        _autorun.install_in_child()
    except Exception as _exc:  # telemetry never stops a program from starting
        sys.stderr.write("launchtrace: export not set up in process %d: %s\n" % (os.getpid(), _exc))

try:
    _run_hidden_sitecustomize()
except Exception as _exc:  # the environment's own sitecustomize failed: Python would say so and go on
    sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n" % (type(_exc).__name__, _exc))
