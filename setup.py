"""The one compiled part, built by ``pip install``: the Reddit reader's line scanner, in C so
a pushshift dump is searched at memory speed outside the GIL (everything else is in
pyproject.toml)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("mmcurate.sources._linescan", ["sources/_linescan.c"], extra_compile_args=["-O2"])])
