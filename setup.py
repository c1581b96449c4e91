"""The one compiled part, built by ``pip install`` when it can be: the Reddit reader's line
scanner, in C so a pushshift dump is searched at memory speed outside the GIL. It is
optional: without a C compiler (or with one that lacks GCC/Clang builtins, such as MSVC) the
install still succeeds and the reader uses the same picker in pure Python
(``sources/linescan.py``). Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("mmcurate.sources._linescan", ["sources/_linescan.c"], extra_compile_args=["-O2"], optional=True)
    ]
)
