"""Builds the zimp package: pure Python, plus the compiled cffi module when it can.

The compiled module (cffi_build.py) needs a C compiler and Python's headers
(Debian: python3-dev). Without them the install still succeeds, with a warning, and the
package runs its cffi ABI-mode fallback (slower calls, same behaviour). The checkout the
package is built from is recorded in zimp/_origin.py, so that the installed package
finds a libzimp built in that checkout (docs/python.md, "Finding libzimp").
"""
import os

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing: the ABI-mode fallback needs no compiler."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as err:   # no compiler, no Python.h: setuptools raises various
            self.warn(f"zimp: compiled module not built ({err}); using cffi ABI mode")

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as err:
            self.warn(f"zimp: {ext.name} not built ({err}); using cffi ABI mode")


class RecordOrigin(build_py):
    """Writes zimp/_origin.py (in the build folder only) naming the source checkout."""

    def run(self) -> None:
        super().run()
        root = os.path.dirname(HERE)
        target = os.path.join(self.build_lib, "zimp", "_origin.py")
        with open(target, "w") as f:
            f.write('"""Written at install time: the checkout this package was built from."""\n')
            f.write(f"CHECKOUT = {root!r}\n")


setup(cmdclass={"build_ext": OptionalBuildExt, "build_py": RecordOrigin},
      cffi_modules=["cffi_build.py:ffi"])
