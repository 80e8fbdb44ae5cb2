"""Builds the goldminer package for the Python that runs pip, from a
configured and built GoldMiner build directory, a source tree configured
and built in-tree, or an installed suite (pkg-config); build_source.py says
in which order it looks, and this prints which it used:

    pip install ./python
    GOLDMINER_BUILD_DIR=/path/to/build pip install ./python
    PKG_CONFIG_PATH=/usr/local/lib/pkgconfig pip install ./python

The package holds the pure-Python files of goldminer/, goldminer._session
compiled by pybind11 for the Python that runs pip, a build's prebuilt
goldminer._split when it was built for this Python's ABI (used only under
the torch it was built for), goldminer/_build_info.py and the split's C++
sources (goldminer/_csrc), which goldminer.split compiles against any other
torch on first use (goldminer/_split_build.py).
"""
import os
import sys

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_source  # noqa: E402  (beside this file, which pip's backend does not put on sys.path)

SOURCE = build_source.find(HERE)
sys.stderr.write("goldminer setup.py: building goldminer %s from %s\n" % (SOURCE.version, SOURCE.what))
BUILD_INFO = {}
with open(SOURCE.build_info_py) as f:
    exec(compile(f.read(), SOURCE.build_info_py, "exec"), BUILD_INFO)


class BuildPy(build_py):
    """The pure-Python files, plus _build_info.py, goldminer/_csrc and the
    prebuilt _split (when it matches this Python's ABI)."""

    def run(self):
        super().run()
        package = os.path.join(self.build_lib, "goldminer")
        self.copy_file(SOURCE.build_info_py, os.path.join(package, "_build_info.py"))
        for rel in BUILD_INFO["SPLIT_SOURCES"]:
            target = os.path.join(package, "_csrc", rel)
            self.mkpath(os.path.dirname(target))
            self.copy_file(os.path.join(SOURCE.split_source_dir, rel), target)
        for path in SOURCE.split_ext:
            self.copy_file(path, os.path.join(package, os.path.basename(path)))


class BuildExt(build_ext):
    """pybind11's build_ext, with _session's sources from the build's
    source tree or the installed suite."""

    def build_extensions(self):
        for ext in self.extensions:
            if ext.name == "goldminer._session":
                ext.sources = list(SOURCE.session_sources)
        super().build_extensions()


session = Pybind11Extension(
    "goldminer._session",
    [],  # set by BuildExt: setuptools refuses sources outside this directory
    cxx_std=17,
    extra_compile_args=SOURCE.compile_args,
    extra_link_args=SOURCE.link_args,
    depends=SOURCE.depends,
)

setup(
    version=SOURCE.version,
    license="GPL-2.0-or-later",  # as the whole tree (LICENSE at its top)
    ext_modules=[session],
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
    options={
        # Keep setuptools' own build files out of the source tree (which
        # `make distcheck` makes read-only).
        "build": {"build_base": os.path.join(SOURCE.setup_base, "build")},
        "egg_info": {"egg_base": SOURCE.setup_base},
    },
)
