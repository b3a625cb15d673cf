"""Installs the skippr module that `make` built (docs/python.md):

    pip install --no-build-isolation ./python

Nothing is compiled here and nothing is downloaded: the package is python/skippr/ plus the
extension the build wrote to <build>/python/skippr/ and the libduckdb.so it put beside it.
<build> is $SKIPPR_BUILD_DIR, else the repository's build/.
"""

import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.environ.get("SKIPPR_BUILD_DIR", os.path.join(HERE, "..", "build"))
BUILT_PACKAGE = os.path.join(BUILD_DIR, "python", "skippr")


def built_libraries():
    extensions = glob.glob(os.path.join(BUILT_PACKAGE, "_engine.*.so"))
    duckdb = os.path.join(BUILT_PACKAGE, "libduckdb.so")
    if not extensions or not os.path.exists(duckdb):
        raise SystemExit(f"skippr: no built extension in {BUILT_PACKAGE}; run `make` first (or "
                         "set SKIPPR_BUILD_DIR to the build directory)")
    return [extensions[0], duckdb]


class BuildWithEngine(build_py):
    """The pure-Python files, then the built extension and libduckdb.so beside them."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "skippr")
        os.makedirs(target, exist_ok=True)
        for library in built_libraries():  # the extension's RPATH is $ORIGIN
            shutil.copy2(library, target)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: the package carries a compiled module


setup(
    name="skippr",
    version="0.1.0",
    description="The skipprd ingest engine as a Python module",
    packages=["skippr"],
    package_data={"skippr": ["py.typed", "*.pyi"]},
    python_requires=">=3.10",
    cmdclass={"build_py": BuildWithEngine},
    distclass=BinaryDistribution,
    zip_safe=False,
)
