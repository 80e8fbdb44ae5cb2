"""Where python/setup.py takes what it builds the goldminer package from.

find() looks, in this order, and setup.py says which it used:

1. GOLDMINER_BUILD_DIR, when set: a configured and built build directory
   (an error when it is not built);
2. the source tree around this folder: configured and built in-tree
   (python-build-info.txt next to configure), else its ../build;
3. an installed suite, through pkg-config (goldminer-python.pc, which
   `make install` installs: tw_lib/python/python_dev.am), PKG_CONFIG_PATH
   and PKG_CONFIG_SYSROOT_DIR honoured;

and else stops with one error that names the three places and what to do.

A build directory describes itself in two files make writes there
(Makefile.am): python-build-info.txt (the compile line of _session, the
convenience archives and system libraries it links, the prebuilt _split)
and python/goldminer/_build_info.py. An installed suite describes itself in
goldminer-python.pc: its Cflags and Libs, and package_sources, the folder
of _session's sources, _build_info.py and the split's sources (_csrc).
Neither is repeated here.
"""
import atexit
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile

PC_MODULE = "goldminer-python"


class Source:
    """What setup.py builds from: `what` (a line for the log), the package
    version, _session's sources and compile and link words, the files
    whose change relinks it, the _build_info.py and the folder of the
    split's sources (goldminer/_csrc) to copy, the prebuilt _split for this
    Python (if any), and where setuptools keeps its own build files."""

    def __init__(self, what, version, session_sources, compile_args, link_args, depends, build_info_py,
                 split_source_dir, split_ext, setup_base):
        self.what = what
        self.version = version
        self.session_sources = session_sources
        self.compile_args = compile_args
        self.link_args = link_args
        self.depends = depends
        self.build_info_py = build_info_py
        self.split_source_dir = split_source_dir
        self.split_ext = split_ext
        self.setup_base = setup_base


def _is_built(build_dir):
    return (os.path.isfile(os.path.join(build_dir, "python-build-info.txt"))
            and os.path.isfile(os.path.join(build_dir, "python", "goldminer", "_build_info.py")))


def read_info(info_file):
    """python-build-info.txt as {key: [word, ...]} ("key<TAB>word" lines)."""
    info = {}
    with open(info_file) as f:
        for number, line in enumerate(f, 1):
            key, sep, word = line.rstrip("\n").partition("\t")
            if not sep:
                raise SystemExit("goldminer setup.py: %s:%d: expected 'key<TAB>word', got %r"
                                 % (info_file, number, line))
            info.setdefault(key, []).append(word)
    return info


def one(info, key, info_file):
    words = info.get(key, [])
    if len(words) != 1:
        raise SystemExit("goldminer setup.py: %s: expected one '%s' line, found %d (rerun make there)"
                         % (info_file, key, len(words)))
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


def link_args(words, info_file, build_dir):
    """The archives (statically, in one group: they refer to each other)
    then the system libraries, each once, in first-seen order. A libtool
    .la file of a system library becomes -L<dir> -l<name>."""
    archives, system = [], []
    for w in words:
        if w.endswith(".a"):
            if not os.path.isfile(w):
                raise SystemExit("goldminer setup.py: %s names %s, which does not exist: run make in %s"
                                 % (info_file, w, build_dir))
            if w not in archives:
                archives.append(w)
            continue
        if w.endswith(".la"):
            name = os.path.basename(w)[:-3]
            if not name.startswith("lib"):
                raise SystemExit("goldminer setup.py: %s: cannot link %s (not lib<name>.la)" % (info_file, w))
            for flag in ("-L" + os.path.dirname(w), "-l" + name[3:]):
                if flag not in system:
                    system.append(flag)
            continue
        if w not in system or not w.startswith(("-l", "-L")):
            system.append(w)
    return ["-Wl,--exclude-libs,ALL", "-Wl,--start-group"] + archives + ["-Wl,--end-group"] + system


def from_build_dir(build_dir, what):
    """A configured and built build directory (or source tree configured
    in-tree)."""
    info_file = os.path.join(build_dir, "python-build-info.txt")
    info = read_info(info_file)
    source_dir = one(info, "srcdir", info_file)
    sessions = [os.path.join(source_dir, s) for s in info.get("session_source", []) if s.endswith(".cc")]
    if not sessions:
        raise SystemExit("goldminer setup.py: %s names no session_source: rerun make there" % info_file)
    ext_suffix = sysconfig.get_config_var("EXT_SUFFIX")
    split_ext = info.get("split_ext", []) if one(info, "ext_suffix", info_file) == ext_suffix else []
    session_link = info.get("session_link", [])
    setup_base = os.path.join(build_dir, "python-setup")
    os.makedirs(setup_base, exist_ok=True)
    return Source(
        what="%s %s" % (what, build_dir),
        version=one(info, "version", info_file),
        session_sources=sessions,
        compile_args=compile_args(info.get("session_compile", []), build_dir,
                                  set(info.get("pybind11_cppflags", []))),
        link_args=link_args(session_link, info_file, build_dir),
        # Relinked when an archive or the build's flags change, not only its source.
        depends=[w for w in session_link if w.endswith(".a")] + [info_file],
        build_info_py=os.path.join(build_dir, "python", "goldminer", "_build_info.py"),
        split_source_dir=source_dir,
        split_ext=split_ext,
        setup_base=setup_base)


def _pkg_config(*args):
    """pkg-config's output for `args` (PKG_CONFIG names the program), or
    raises OSError/CalledProcessError."""
    program = shlex.split(os.environ.get("PKG_CONFIG") or "pkg-config")
    return subprocess.run(program + list(args), check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True).stdout.strip()


def _installed_problem():
    """Why no installed suite can be used ("" when one can)."""
    try:
        _pkg_config("--exists", "--print-errors", PC_MODULE)
    except OSError as e:
        return "pkg-config (%s) did not run: %s" % (os.environ.get("PKG_CONFIG") or "pkg-config", e)
    except subprocess.CalledProcessError as e:
        where = os.environ.get("PKG_CONFIG_PATH")
        return "pkg-config finds no %s.pc (PKG_CONFIG_PATH=%s)%s" % (
            PC_MODULE, where if where is not None else "unset", ": " + e.stderr.strip() if e.stderr.strip() else "")
    return ""


def from_installed():
    """An installed suite, through goldminer-python.pc."""
    sources = _pkg_config("--variable=package_sources", PC_MODULE)
    # pkgconf prefixes a variable's path with the sysroot; pkg-config does not.
    sysroot = os.environ.get("PKG_CONFIG_SYSROOT_DIR", "").rstrip("/")
    if sysroot and not sources.startswith(sysroot + "/"):
        sources = sysroot + sources
    if not os.path.isdir(sources):
        raise SystemExit("goldminer setup.py: %s.pc's package_sources %s is not a folder: reinstall the suite "
                         "(make install)" % (PC_MODULE, sources))
    sessions = sorted(os.path.join(sources, f) for f in os.listdir(sources) if f.endswith(".cc"))
    build_info_py = os.path.join(sources, "_build_info.py")
    split_source_dir = os.path.join(sources, "_csrc")
    for path, what in ((build_info_py, "file"), (split_source_dir, "folder")):
        if not os.path.exists(path):
            raise SystemExit("goldminer setup.py: the installed suite has no %s %s: reinstall it (make install)"
                             % (what, path))
    if not sessions:
        raise SystemExit("goldminer setup.py: %s holds no _session source (*.cc): reinstall the suite "
                         "(make install)" % sources)
    # setuptools' files in a folder of this run: the source tree pip runs
    # in may be read-only, and nothing of a build tree is at hand.
    setup_base = tempfile.mkdtemp(prefix="goldminer-setup-")
    atexit.register(shutil.rmtree, setup_base, True)
    pc_file = os.path.join(_pkg_config("--variable=pcfiledir", PC_MODULE), PC_MODULE + ".pc")
    return Source(
        what="the installed suite of %s" % pc_file,
        version=_pkg_config("--modversion", PC_MODULE),
        session_sources=sessions,
        compile_args=shlex.split(_pkg_config("--cflags", PC_MODULE)),
        # --static: Libs.private names the system libraries the archive needs.
        link_args=["-Wl,--exclude-libs,ALL"] + shlex.split(_pkg_config("--libs", "--static", PC_MODULE)),
        depends=[],
        build_info_py=build_info_py,
        split_source_dir=split_source_dir,
        split_ext=[],
        setup_base=setup_base)


def find(here):
    """The Source for the python/ folder `here`, in find()'s order."""
    named = os.environ.get("GOLDMINER_BUILD_DIR")
    if named:
        build_dir = os.path.abspath(named)
        if not _is_built(build_dir):
            raise SystemExit(
                "goldminer setup.py: GOLDMINER_BUILD_DIR=%s has no python-build-info.txt or "
                "python/goldminer/_build_info.py: configure and build GoldMiner there first (make), or set "
                "GOLDMINER_BUILD_DIR to a built build directory" % build_dir)
        return from_build_dir(build_dir, "the build directory (GOLDMINER_BUILD_DIR)")
    top = os.path.normpath(os.path.join(here, ".."))
    if os.path.isfile(os.path.join(top, "configure")) and _is_built(top):
        return from_build_dir(top, "the source tree, configured in-tree,")
    build_dir = os.path.join(top, "build")
    if _is_built(build_dir):
        return from_build_dir(build_dir, "the build directory")
    problem = _installed_problem()
    if not problem:
        return from_installed()
    if os.path.isfile(os.path.join(top, "config.status")):
        in_tree = "configured in-tree but not built: run make there"
    else:
        in_tree = "not configured in-tree"
    raise SystemExit(
        "goldminer setup.py: nothing to build the goldminer package from; looked at (1) GOLDMINER_BUILD_DIR: "
        "not set; (2) the source tree %s: %s, and its build directory %s: not built (no python-build-info.txt); "
        "(3) an installed suite: %s. Build GoldMiner in the source tree (./configure && make) or in %s, or set "
        "GOLDMINER_BUILD_DIR to a built build directory, or install it (make install) and point "
        "PKG_CONFIG_PATH at the folder of its %s.pc" % (top, in_tree, build_dir, problem, build_dir, PC_MODULE))
