"""goldminer.split under any torch: the extension goldminer._split that
serves the running torch.

The split works on libtorch's TorchScript IR, so its extension must be
built against the very torch that runs it. make builds goldminer._split
against the build's libtorch (Debian's torch); _build_info.SPLIT_TORCH_VERSION
names the torch.__version__ it serves. Under any other torch this module
compiles the split's C++ sources (goldminer/_csrc, or the source tree of a
make-staged package) against the running torch, once, with
torch.utils.cpp_extension.load (which runs the ninja program: Debian's
ninja-build, or PyPI's ninja in the environment), into a build directory
keyed by the torch version, the Python ABI and a sha256 of the sources and
the extra flags:

    $GOLDMINER_CACHE_DIR, else $XDG_CACHE_HOME/goldminer, else ~/.cache/goldminer

Processes that compile at the same time take turns (a lock file per key,
held with flock, so a build killed midway never blocks the next one);
ninja rebuilds only what is out of date, so a later process loads the
cached build after a check that takes well under a second.
"""
import contextlib
import fcntl
import hashlib
import io
import os
import re
import shutil
import sys
import sysconfig

_loaded = None

def load():
    """The goldminer._split module for the running torch (compiled on
    first use when the prebuilt one serves another torch)."""
    global _loaded
    if _loaded is None:
        _loaded = _prebuilt() or _compiled()
    return _loaded


def prebuilt_matches():
    """Whether the prebuilt _split exists and serves the running torch."""
    import torch

    from goldminer import _build_info

    if not _build_info.SPLIT_TORCH_VERSION or torch.__version__ != _build_info.SPLIT_TORCH_VERSION:
        return False
    package = os.path.dirname(os.path.abspath(__file__))
    return os.path.isfile(os.path.join(package, "_split" + sysconfig.get_config_var("EXT_SUFFIX")))


def _prebuilt():
    if not prebuilt_matches():
        return None
    import importlib

    return importlib.import_module("goldminer._split")


def cache_dir():
    """Where compiled splits are kept."""
    base = os.environ.get("GOLDMINER_CACHE_DIR")
    if base:
        return base
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "goldminer")


def check_private(path, what):
    """Refuses `path` (the split cache, a compiled split's folder or the
    split itself) unless this user or root owns it and no one else may
    write it: a module loaded from there runs as this user, so a shared
    cache where another user can plant or swap a .so is an attack."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise RuntimeError("goldminer.split: %s %s: %s" % (what, path, e)) from None
    euid = os.geteuid()
    if st.st_uid not in (euid, 0) or st.st_mode & 0o022:
        raise RuntimeError(
            "goldminer.split: %s %s is owned by uid %d with mode %o: a compiled split is loaded only from a "
            "folder this user (uid %d) or root owns and that no one else may write (chmod go-w, or set "
            "GOLDMINER_CACHE_DIR to a private folder)" % (what, path, st.st_uid, st.st_mode & 0o7777, euid))


def sources_root():
    """The directory the split's sources (_build_info.SPLIT_SOURCES) are
    relative to: goldminer/_csrc in an installed package, else the source
    tree a make-staged package was built from."""
    from goldminer import _build_info

    for root in (os.path.join(os.path.dirname(os.path.abspath(__file__)), "_csrc"), _build_info.SOURCE_DIR):
        if all(os.path.isfile(os.path.join(root, f)) for f in _build_info.SPLIT_SOURCES):
            return root
    raise RuntimeError("goldminer.split: the split's C++ sources are missing (neither goldminer/_csrc nor %s "
                       "holds all of %s): reinstall the goldminer package" % (_build_info.SOURCE_DIR,
                                                                             ", ".join(_build_info.SPLIT_SOURCES)))


def _flags():
    """The flags the split adds to those torch.utils.cpp_extension passes
    for the running torch (its include and library directories, its
    _GLIBCXX_USE_CXX11_ABI, -fPIC, torch's libraries): (compile flags, link
    flags)."""
    import torch

    major = int(torch.__version__.split(".")[0])
    # The split's sources need C++17, and C++20 under torch 2.x (whose own
    # headers ask for it from 2.x on); -O2 because cpp_extension adds no
    # optimisation of its own.
    compile_flags = ["-std=c++17" if major < 2 else "-std=c++20", "-O2", "-fvisibility=hidden",
                     "-Wno-unused-parameter"]
    # cpp_extension links torch's libraries without an rpath: they are
    # found because torch has loaded them; the rpath makes the split
    # loadable on its own too (ldd, a process that imports it first).
    torch_lib = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "lib")
    return compile_flags, ["-Wl,-rpath," + torch_lib]


def _key(root, sources, compile_flags, link_flags):
    import torch

    digest = hashlib.sha256()
    for word in [os.environ.get("CXX") or "c++"] + compile_flags + link_flags:
        digest.update(word.encode() + b"\0")
    for rel in sorted(sources):
        digest.update(rel.encode() + b"\0")
        with open(os.path.join(root, rel), "rb") as f:
            digest.update(f.read())
        digest.update(b"\0")
    version = re.sub(r"[^A-Za-z0-9.]+", "_", torch.__version__)
    return "split-torch%s-%s-%s" % (version, sys.implementation.cache_tag, digest.hexdigest()[:16])


def _paths():
    """(cache, build directory, extension): where the split compiled for
    the running torch is built and loaded from (cpp_extension names the
    extension _split.so)."""
    from goldminer import _build_info

    cache = cache_dir()
    directory = os.path.join(cache, _key(sources_root(), _build_info.SPLIT_SOURCES, *_flags()))
    return cache, directory, os.path.join(directory, "_split.so")


def _failure(what, cache, detail):
    import torch

    lines = detail.strip().splitlines()[-20:]
    return RuntimeError("goldminer.split: compiling the split for torch %s (cache %s) failed: %s%s"
                        % (torch.__version__, cache, what, "".join("\n" + line for line in lines)))


def _failed_step(output):
    """What ninja's output (-v: each command before it runs) says failed:
    "compiling SOURCE" or "linking TARGET"."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("FAILED: "):
            continue
        words = lines[i + 1].split() if i + 1 < len(lines) else []
        if "-c" in words[:-1]:
            return "compiling %s" % words[words.index("-c") + 1]
        # "FAILED: _split.so", or "FAILED: [code=1] _split.so" (ninja 1.12 on)
        return "linking %s" % " ".join(w for w in line.split()[1:] if not w.startswith("[code="))
    return "building it"


def _ninja_errors(output):
    """ninja's output without the commands it echoes (-v), which are long
    and say nothing of the error: the compiler's and ninja's messages."""
    kept, skip_next = [], False
    output = re.sub(r"^Error building extension '[^']*': ", "", output)
    for line in output.splitlines():
        if skip_next or re.match(r"\[\d+/\d+\] ", line):
            skip_next = False
            continue
        skip_next = line.startswith("FAILED: ")
        kept.append(line)
    return "\n".join(kept)


@contextlib.contextmanager
def _build_environment(cache):
    """PATH and MAX_JOBS as cpp_extension's build needs them, for the
    length of the build: ninja from PATH, else from the running Python's
    scripts directory (where pip puts PyPI's ninja, absent from PATH when
    the venv is not activated); as many compilers at once as this
    process may use CPUs (ninja would start one more than the node has
    and two, ~0.7 GB each, in a job given two CPUs of many), unless
    MAX_JOBS says otherwise."""
    cxx = os.environ.get("CXX") or "c++"
    if shutil.which(cxx) is None:
        raise _failure("no C++ compiler '%s' (install g++, or set CXX)" % cxx, cache, "")
    saved = {name: os.environ.get(name) for name in ("PATH", "MAX_JOBS")}
    if shutil.which("ninja") is None:
        scripts = sysconfig.get_path("scripts")
        if shutil.which("ninja", path=scripts) is None:
            raise _failure("no ninja program, which torch.utils.cpp_extension runs (apt install ninja-build, or "
                           "pip install ninja into this Python's environment)", cache, "")
        os.environ["PATH"] = scripts + os.pathsep + (saved["PATH"] or os.defpath)
    if saved["MAX_JOBS"] is None:
        os.environ["MAX_JOBS"] = str(max(1, len(os.sched_getaffinity(0))))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _cpp_extension():
    """torch.utils.cpp_extension, imported without the line it prints
    where a CUDA toolkit is installed but torch has no CUDA ("No CUDA
    runtime is found"): the split compiles no CUDA code, so the line would
    only mislead."""
    import logging

    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)  # torch 2.x logs it as a warning
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # torch 1.x prints it
            from torch.utils import cpp_extension
    finally:
        logger.setLevel(level)
    return cpp_extension


def _compiled():
    import torch

    from goldminer import _build_info

    root = sources_root()
    compile_flags, link_flags = _flags()
    cache, directory, target = _paths()
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as e:
        raise RuntimeError("goldminer.split: cannot use the cache directory %s for the split compiled for "
                           "torch %s: %s (set GOLDMINER_CACHE_DIR)" % (cache, torch.__version__, e)) from None
    for path, what in ((cache, "the cache directory"), (directory, "the folder of the split")):
        check_private(path, what)
    try:
        lock = open(os.path.join(cache, os.path.basename(directory) + ".lock"), "w")
    except OSError as e:
        raise RuntimeError("goldminer.split: cannot use the cache directory %s for the split compiled for "
                           "torch %s: %s (set GOLDMINER_CACHE_DIR)" % (cache, torch.__version__, e)) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # cpp_extension's own lock in the build directory is, under torch
        # 1.x, a file whose mere presence blocks (torch 2.x holds an flock on
        # it); holding this flock, no other process builds here, so a file
        # left by a killed build is stale.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, "lock"))
        if os.path.isfile(target):
            check_private(target, "the compiled split")
        else:
            print("goldminer.split: compiling the split for torch %s (once; cached in %s)"
                  % (torch.__version__, directory), file=sys.stderr, flush=True)
        cpp_extension = _cpp_extension()
        units = [os.path.join(root, s) for s in _build_info.SPLIT_SOURCES if s.endswith(".cc")]
        with _build_environment(cache):
            try:
                module = cpp_extension.load("_split", units, extra_cflags=compile_flags, extra_ldflags=link_flags,
                                            extra_include_paths=[root, os.path.join(root, "include")],
                                            build_directory=directory, verbose=False)
            except ImportError as e:
                raise RuntimeError("goldminer.split: the split compiled for torch %s (%s) does not load: %s (remove "
                                   "%s to compile it again)" % (torch.__version__, target, e, directory)) from None
            except Exception as e:  # cpp_extension's errors: RuntimeError with ninja's output, OSError
                raise _failure(_failed_step(str(e)), cache, _ninja_errors(str(e))) from None
    # Later imports of goldminer._split get this one, not a prebuilt one
    # for another torch.
    sys.modules["goldminer._split"] = module
    return module
