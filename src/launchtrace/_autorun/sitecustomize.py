"""Python runs this at start in every process ``launchtrace run`` starts (its folder is put on ``PYTHONPATH``).

It installs :mod:`launchtrace.autorun`'s hook, which starts the export when the process imports Warp (a
``multiprocessing`` child started with ``spawn`` or ``forkserver``, a ``subprocess`` running Python), then
runs the ``sitecustomize`` this one hides, if any, so the environment's own start-up code still runs.
Kept tiny: a process that never imports Warp pays for one small import.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
try:
    try:
        import launchtrace.autorun as _autorun
    except ImportError:  # launchtrace came from the parent's sys.path: the folder above this package's
        sys.path.append(os.path.dirname(os.path.dirname(_here)))
        import launchtrace.autorun as _autorun
    _autorun.install_in_child()
    _autorun.run_hidden_sitecustomize(_here)
except Exception as _exc:  # telemetry never stops a program from starting
    sys.stderr.write(f"launchtrace: export not set up in process {os.getpid()}: {_exc}\n")
