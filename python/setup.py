"""Builds the goldminer package from a configured and built GoldMiner build
directory (GOLDMINER_BUILD_DIR, default ../build next to this file):

    GOLDMINER_BUILD_DIR=/path/to/build pip install ./python

The package holds the pure-Python files of goldminer/, goldminer._session
compiled by pybind11 for the Python that runs pip, the build's prebuilt
goldminer._split when it was built for this Python's ABI (used only under
the torch it was built for), goldminer/_build_info.py and the split's C++
sources (goldminer/_csrc), which goldminer.split compiles against any other
torch on first use (goldminer/_split_build.py).

Everything about the build comes from two files make writes there
(Makefile.am): python-build-info.txt (the compile line of _session, the
convenience archives and system libraries it links) and
python/goldminer/_build_info.py; this file repeats no list of them.
"""
import os
import sysconfig

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.path.abspath(os.environ.get("GOLDMINER_BUILD_DIR") or os.path.join(HERE, "..", "build"))
INFO_FILE = os.path.join(BUILD_DIR, "python-build-info.txt")
BUILD_INFO_PY = os.path.join(BUILD_DIR, "python", "goldminer", "_build_info.py")


def read_info():
    """python-build-info.txt as {key: [word, ...]} ("key<TAB>word" lines)."""
    if not os.path.isfile(INFO_FILE) or not os.path.isfile(BUILD_INFO_PY):
        raise SystemExit(
            "goldminer setup.py: %s has no python-build-info.txt or python/goldminer/_build_info.py: "
            "configure and build GoldMiner there first (make), or set GOLDMINER_BUILD_DIR to a built "
            "build directory" % BUILD_DIR)
    info = {}
    with open(INFO_FILE) as f:
        for number, line in enumerate(f, 1):
            key, sep, word = line.rstrip("\n").partition("\t")
            if not sep:
                raise SystemExit("goldminer setup.py: %s:%d: expected 'key<TAB>word', got %r"
                                 % (INFO_FILE, number, line))
            info.setdefault(key, []).append(word)
    return info


def one(info, key):
    words = info.get(key, [])
    if len(words) != 1:
        raise SystemExit("goldminer setup.py: %s: expected one '%s' line, found %d (rerun make there)"
                         % (INFO_FILE, key, len(words)))
    return words[0]


def compile_args(words, build_dir, drop):
    """make's compile words without those in `drop` (the Python and
    pybind11 headers of make's Python: pybind11 adds this Python's), with
    relative -I directories made absolute (make compiles in the build
    directory)."""
    args = []
    for w in words:
        if w in drop:
            continue
        if w.startswith("-I") and not os.path.isabs(w[2:]):
            w = "-I" + os.path.normpath(os.path.join(build_dir, w[2:]))
        args.append(w)
    return args


def link_args(words):
    """The archives (statically, in one group: they refer to each other)
    then the system libraries, each once, in first-seen order. A libtool
    .la file of a system library becomes -L<dir> -l<name>."""
    archives, system = [], []
    for w in words:
        if w.endswith(".a"):
            if not os.path.isfile(w):
                raise SystemExit("goldminer setup.py: %s names %s, which does not exist: run make in %s"
                                 % (INFO_FILE, w, BUILD_DIR))
            if w not in archives:
                archives.append(w)
            continue
        if w.endswith(".la"):
            name = os.path.basename(w)[:-3]
            if not name.startswith("lib"):
                raise SystemExit("goldminer setup.py: %s: cannot link %s (not lib<name>.la)" % (INFO_FILE, w))
            for flag in ("-L" + os.path.dirname(w), "-l" + name[3:]):
                if flag not in system:
                    system.append(flag)
            continue
        if w not in system or not w.startswith(("-l", "-L")):
            system.append(w)
    return ["-Wl,--exclude-libs,ALL", "-Wl,--start-group"] + archives + ["-Wl,--end-group"] + system


INFO = read_info()
os.makedirs(os.path.join(BUILD_DIR, "python-setup"), exist_ok=True)
SOURCE_DIR = one(INFO, "srcdir")
BUILD_INFO = {}
with open(BUILD_INFO_PY) as f:
    exec(compile(f.read(), BUILD_INFO_PY, "exec"), BUILD_INFO)


class BuildPy(build_py):
    """The pure-Python files, plus _build_info.py, goldminer/_csrc and the
    prebuilt _split (when it matches this Python's ABI)."""

    def run(self):
        super().run()
        package = os.path.join(self.build_lib, "goldminer")
        self.copy_file(BUILD_INFO_PY, os.path.join(package, "_build_info.py"))
        for rel in BUILD_INFO["SPLIT_SOURCES"]:
            target = os.path.join(package, "_csrc", rel)
            self.mkpath(os.path.dirname(target))
            self.copy_file(os.path.join(SOURCE_DIR, rel), target)
        ext_suffix = sysconfig.get_config_var("EXT_SUFFIX")
        for path in INFO.get("split_ext", []):
            if one(INFO, "ext_suffix") == ext_suffix:
                self.copy_file(path, os.path.join(package, "_split" + ext_suffix))


SESSION_SOURCES = [os.path.join(SOURCE_DIR, s) for s in INFO.get("session_source", []) if s.endswith(".cc")]
if not SESSION_SOURCES:
    raise SystemExit("goldminer setup.py: %s names no session_source: rerun make there" % INFO_FILE)


class BuildExt(build_ext):
    """pybind11's build_ext, with _session's sources from the source tree."""

    def build_extensions(self):
        for ext in self.extensions:
            if ext.name == "goldminer._session":
                ext.sources = list(SESSION_SOURCES)
        super().build_extensions()


session = Pybind11Extension(
    "goldminer._session",
    [],  # set by BuildExt: setuptools refuses sources outside this directory
    cxx_std=17,
    extra_compile_args=compile_args(INFO.get("session_compile", []), BUILD_DIR,
                                    set(INFO.get("pybind11_cppflags", []))),
    extra_link_args=link_args(INFO.get("session_link", [])),
    # Relinked when an archive or the build's flags change, not only its source.
    depends=[w for w in INFO.get("session_link", []) if w.endswith(".a")] + [INFO_FILE],
)

setup(
    version=one(INFO, "version"),
    ext_modules=[session],
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
    options={
        # Keep setuptools' own build files out of the source tree (which
        # `make distcheck` makes read-only).
        "build": {"build_base": os.path.join(BUILD_DIR, "python-setup", "build")},
        "egg_info": {"egg_base": os.path.join(BUILD_DIR, "python-setup")},
    },
)
