"""The compiled hot paths (issue 24), each an optional extension with a pure-Python
fallback: an install without a C compiler goes on without them. Everything else about
the package is in pyproject.toml; `make dist` builds its portable wheel without this
file (scripts/make_dist.sh)."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("raims_node.bridges._resp_scan", ["raims_node/bridges/_resp_scan.c"], optional=True),
])
