"""The compiled hot paths (issue 24), each an optional extension with a pure-Python
fallback: an install without a C compiler goes on without them. Everything else about
the package is in pyproject.toml. RAIMS_NO_EXTENSIONS=1 builds none (make dist: the
portable wheel)."""

import os

from setuptools import Extension, setup

EXTENSIONS = [
    Extension("raims_node.bridges._resp_scan", ["raims_node/bridges/_resp_scan.c"], optional=True),
]

setup(ext_modules=[] if os.environ.get("RAIMS_NO_EXTENSIONS") == "1" else EXTENSIONS)
