"""Builds launchtrace's one optional C extension: the compiled wp.launch capture wrapper.

Everything else is in pyproject.toml. ``optional=True``: where no C compiler is available the install still
succeeds and launchtrace uses the Python wrapper (launchtrace.capture.warp.wrap_launch), which is the reference.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "launchtrace.capture._fastlaunch",
            sources=["src/launchtrace/capture/_fastlaunch.c"],
            optional=True,
        )
    ]
)
