"""goldminer.split under any torch: the extension goldminer._split that
serves the running torch.

The split works on libtorch's TorchScript IR, so its extension must be
built against the very torch that runs it. make builds goldminer._split
against the build's libtorch (Debian's torch); _build_info.SPLIT_TORCH_VERSION
names the torch.__version__ it serves. Under any other torch this module
compiles the split's C++ sources (goldminer/_csrc, or the source tree of a
make-staged package) against the running torch, once, with the compiler
($CXX, else c++) and the running torch's include and library directories
(those torch.utils.cpp_extension uses), into a cache directory keyed by the
torch version, the Python ABI and a sha256 of the sources and the compile
command:

    $GOLDMINER_CACHE_DIR, else $XDG_CACHE_HOME/goldminer, else ~/.cache/goldminer

Processes that compile at the same time take turns (a lock file per key);
a finished build is renamed into place, so a half-written one is never
loaded.
"""
import concurrent.futures
import fcntl
import hashlib
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

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


def _command():
    """The compiler, its compile flags and its link flags for the running
    torch."""
    import torch

    cxx = os.environ.get("CXX") or "c++"
    major = int(torch.__version__.split(".")[0])
    abi = int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    # The directories torch.utils.cpp_extension.include_paths() and
    # library_paths() name (torch 1.13 and 2.x), without importing it:
    # its import warns about CUDA on every machine without CUDA.
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    includes = [os.path.join(torch_dir, "include"),
                os.path.join(torch_dir, "include", "torch", "csrc", "api", "include"),
                sysconfig.get_paths()["include"]]
    compile_flags = ["-std=c++17" if major < 2 else "-std=c++20", "-O2", "-fPIC", "-fvisibility=hidden",
                     "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi, "-Wno-unused-parameter"]
    compile_flags += ["-I" + d for d in includes]
    link_flags = []
    for d in [os.path.join(torch_dir, "lib")]:
        link_flags += ["-L" + d, "-Wl,-rpath," + d]
    link_flags += ["-lc10", "-ltorch", "-ltorch_cpu"]
    return cxx, compile_flags, link_flags


def _key(root, sources, cxx, compile_flags, link_flags):
    import torch

    digest = hashlib.sha256()
    for word in [cxx] + compile_flags + link_flags:
        digest.update(word.encode() + b"\0")
    for rel in sorted(sources):
        digest.update(rel.encode() + b"\0")
        with open(os.path.join(root, rel), "rb") as f:
            digest.update(f.read())
        digest.update(b"\0")
    version = re.sub(r"[^A-Za-z0-9.]+", "_", torch.__version__)
    return "split-torch%s-%s-%s" % (version, sys.implementation.cache_tag, digest.hexdigest()[:16])


def _run(argv):
    """Runs one compiler command; returns (argv, returncode, output)."""
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as e:
        return argv, None, str(e)
    return argv, r.returncode, r.stdout.decode(errors="replace")


def _failure(what, cache, detail):
    import torch

    lines = detail.strip().splitlines()[-20:]
    return RuntimeError("goldminer.split: compiling the split for torch %s (cache %s) failed: %s%s"
                        % (torch.__version__, cache, what, "".join("\n" + line for line in lines)))


def _build(root, sources, cxx, compile_flags, link_flags, target, cache):
    """Compiles `sources` (in parallel) and links them into `target`."""
    if shutil.which(cxx) is None:
        raise _failure("no C++ compiler '%s' (install g++, or set CXX)" % cxx, cache, "")
    work = tempfile.mkdtemp(prefix=".build-", dir=os.path.dirname(target))
    try:
        units = [s for s in sources if s.endswith(".cc")]
        objects = [os.path.join(work, "%d.o" % i) for i in range(len(units))]
        flags = compile_flags + ["-I" + root, "-I" + os.path.join(root, "include")]
        commands = [[cxx] + flags + ["-c", os.path.join(root, u), "-o", o] for u, o in zip(units, objects)]
        jobs = max(1, min(len(commands), len(os.sched_getaffinity(0))))
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            futures = [pool.submit(_run, c) for c in commands]
            for future in concurrent.futures.as_completed(futures):
                argv, rc, output = future.result()
                if rc != 0:
                    for f in futures:
                        f.cancel()
                    raise _failure("compiling %s: %s exited with %s" % (argv[-3], cxx, rc), cache, output)
        linked = os.path.join(work, os.path.basename(target))
        argv, rc, output = _run([cxx, "-shared", "-o", linked] + objects + link_flags)
        if rc != 0:
            raise _failure("linking %s: %s exited with %s" % (target, cxx, rc), cache, output)
        os.replace(linked, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _compiled():
    import torch

    root = sources_root()
    from goldminer import _build_info

    cxx, compile_flags, link_flags = _command()
    cache = cache_dir()
    key = _key(root, _build_info.SPLIT_SOURCES, cxx, compile_flags, link_flags)
    directory = os.path.join(cache, key)
    target = os.path.join(directory, "_split" + sysconfig.get_config_var("EXT_SUFFIX"))
    if not os.path.isfile(target):
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            lock = open(os.path.join(cache, key + ".lock"), "w")
        except OSError as e:
            raise RuntimeError("goldminer.split: cannot use the cache directory %s for the split compiled for "
                               "torch %s: %s (set GOLDMINER_CACHE_DIR)" % (cache, torch.__version__, e)) from None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.isfile(target):
                print("goldminer.split: compiling the split for torch %s (once; cached in %s)"
                      % (torch.__version__, directory), file=sys.stderr, flush=True)
                try:
                    _build(root, _build_info.SPLIT_SOURCES, cxx, compile_flags, link_flags, target, cache)
                except BaseException:
                    shutil.rmtree(directory, ignore_errors=True)
                    raise
    for path, what in ((cache, "the cache directory"), (directory, "the folder of the split"),
                       (target, "the compiled split")):
        check_private(path, what)
    loader = importlib.machinery.ExtensionFileLoader("goldminer._split", target)
    spec = importlib.util.spec_from_file_location("goldminer._split", target, loader=loader)
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as e:
        raise RuntimeError("goldminer.split: the split compiled for torch %s (%s) does not load: %s (remove %s "
                           "to compile it again)" % (torch.__version__, target, e, directory)) from None
    # Later imports of goldminer._split get this one, not a prebuilt one
    # for another torch.
    sys.modules["goldminer._split"] = module
    return module
