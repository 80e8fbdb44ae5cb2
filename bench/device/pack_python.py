#!/usr/bin/env python3
"""Packs a GoldMiner build directory's Python-build inputs, so that
`pip install ./python` (python/setup.py) builds the real goldminer package
on a machine that has none of our Debian packages (bench/device/cuda_checks.sh
pack calls this; `cuda_checks.sh run` uses the result there).

What python/setup.py reads from GOLDMINER_BUILD_DIR, written to PACK/build:
  python-build-info.txt       rewritten: the build's own paths become @BUILD@
                              and the source tree's @SRC@ (cuda_checks.sh run
                              puts in the paths of the machine it runs on);
                              the convenience archives point at their packed
                              copies; each system library (-lNAME, a libtool
                              .la) becomes the path of its packed copy
                              @PACK@/lib/SONAME when the extension make built
                              (SESSION_ELF) needs it, and is left out when it
                              does not (as its linker did); an -lNAME with only
                              a static archive (libcudart_static.a) is packed
                              beside the convenience archives; -L words go;
                              -Wl,--disable-new-dtags -Wl,-rpath,@PACK@/lib
                              are added, so the extension finds the packed
                              libraries and theirs (DT_RPATH applies to the
                              whole chain it loads) without LD_LIBRARY_PATH.
                              split_ext goes: that _split is make's Python's.
  .libs/libgoldminer_*.a      the archives it names, debug info stripped
  python/goldminer/_build_info.py   SOURCE_DIR becomes @SRC@
  every header of the build directory that _session's sources include
                              (gm_config.h), found with the compiler's -M
and PACK/include/dlpack/dlpack.h (and any other header outside the glibc and
GCC families that they include).

The shared libraries themselves go to PACK/lib by libclosure.py (cuda_checks.sh).

usage: pack_python.py PACK BUILDDIR SESSION_ELF
  prints one line per packed item; exits non-zero, naming what, on a
  problem."""
import os
import re
import shutil
import subprocess
import sys

SYSTEM_LIBS = {"dl", "rt", "pthread", "m", "c", "stdc++", "gcc_s"}  # the target's own


def die(message):
    sys.exit("pack_python.py: " + message)


def read_info(path):
    info = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            key, sep, word = line.rstrip("\n").partition("\t")
            if not sep:
                die("%s:%d: expected 'key<TAB>word', got %r" % (path, number, line))
            info.append((key, word))
    return info


def soname(path):
    out = subprocess.run(["readelf", "-dW", path], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[(.+?)\]", out)
    return m.group(1) if m else os.path.basename(path)


def needed(elf):
    out = subprocess.run(["readelf", "-dW", elf], check=True, capture_output=True, text=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out))


def search_dirs(link_words):
    """The -L directories of the link line, then the compiler's own."""
    dirs = [w[2:] for w in link_words if w.startswith("-L")]
    out = subprocess.run(["g++", "-print-search-dirs"], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("libraries: ="):
            dirs += line[len("libraries: ="):].split(":")
    return [os.path.normpath(d) for d in dirs if d]


def find_lib(name, dirs):
    """('so', path) or ('a', path) of -l<name>, as the linker would pick it."""
    for d in dirs:
        for kind in ("so", "a"):
            path = os.path.join(d, "lib%s.%s" % (name, kind))
            if os.path.exists(path):
                return kind, os.path.realpath(path)
    return None, None


def main(argv):
    if len(argv) != 4:
        die(__doc__)
    pack, build, session_elf = (os.path.abspath(a) for a in argv[1:])
    info_path = os.path.join(build, "python-build-info.txt")
    build_info_py = os.path.join(build, "python", "goldminer", "_build_info.py")
    for path in (info_path, build_info_py, session_elf):
        if not os.path.isfile(path):
            die("%s missing: build the package first (make -C %s _session.la)" % (path, build))
    info = read_info(info_path)
    srcdir = dict(info)["srcdir"]
    out_build = os.path.join(pack, "build")
    os.makedirs(os.path.join(out_build, ".libs"), exist_ok=True)
    os.makedirs(os.path.join(out_build, "python", "goldminer"), exist_ok=True)
    ext_needed = needed(session_elf)
    link_words = [w for k, w in info if k == "session_link"]
    dirs = search_dirs(link_words)

    def local(path):
        """A path of the build or source tree as a placeholder path."""
        for root, mark in ((build, "@BUILD@"), (srcdir, "@SRC@")):
            if path == root or path.startswith(root + "/"):
                return mark + path[len(root):]
        return path

    def pack_archive(path):
        name = os.path.basename(path)
        target = os.path.join(out_build, ".libs", name)
        if not os.path.exists(target):
            subprocess.run(["strip", "--strip-debug", "-o", target, path], check=True)
            print("archive %s (%d bytes)" % (name, os.path.getsize(target)))
        return "@BUILD@/.libs/" + name

    def shared(name, path):
        so = soname(path)
        if so not in ext_needed:
            print("left out -l%s (%s): the extension make built does not need it" % (name, so))
            return []
        print("shared -l%s -> @PACK@/lib/%s" % (name, so))
        return ["@PACK@/lib/" + so]

    out = []
    for key, word in info:
        if key == "split_ext":
            continue
        if key in ("srcdir", "builddir"):
            word = local(word)
        elif key == "session_compile" and word.startswith("-I") and os.path.isabs(word[2:]):
            word = "-I" + local(word[2:])
        elif key == "session_link":
            if word.endswith(".a"):
                out.append((key, pack_archive(word)))
                continue
            if word.startswith("-L"):
                continue
            if word.endswith(".la"):
                lib = os.path.basename(word)[3:-3]
                kind, path = find_lib(lib, [os.path.dirname(word)] + dirs)
                if kind != "so":
                    die("%s: no shared library for %s" % (info_path, word))
                out += [(key, w) for w in shared(lib, path)]
                continue
            if word.startswith("-l") and word[2:] not in SYSTEM_LIBS:
                kind, path = find_lib(word[2:], dirs)
                if kind is None:
                    die("%s: %s: no lib%s.so or .a in %s" % (info_path, word, word[2:], " ".join(dirs)))
                if kind == "a":
                    out.append((key, pack_archive(path)))
                else:
                    out += [(key, w) for w in shared(word[2:], path)]
                continue
        out.append((key, word))

    # The headers _session's sources include from outside the source tree,
    # the system's C/C++ runtime, Python and pybind11 (setup.py's pybind11
    # and the target's Python bring those).
    compile_words = [w for k, w in info if k == "session_compile"]
    sources = [os.path.join(srcdir, w) for k, w in info if k == "session_source" and w.endswith(".cc")]
    deps = subprocess.run(["g++", "-M"] + compile_words + sources, cwd=build, check=True, capture_output=True,
                          text=True).stdout
    packed_include = False
    drop = [w[2:] for k, w in info if k == "pybind11_cppflags" and w.startswith("-I")]
    for header in sorted(set(deps.replace("\\\n", " ").split())):
        if header.endswith(":") or not header.endswith((".h", ".hpp")):
            continue
        path = os.path.normpath(os.path.join(build, header))
        if path.startswith(build + "/"):
            rel = os.path.relpath(path, build)
            dest = os.path.join(out_build, rel)
        elif path.startswith(srcdir + "/") or any(path.startswith(d + "/") for d in drop):
            continue
        elif re.match(r"/usr/include/(dlpack)/", path):
            rel = os.path.relpath(path, "/usr/include")
            dest = os.path.join(pack, "include", rel)
            packed_include = True
        else:
            continue  # glibc, the kernel's and GCC's headers: the target's own
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(path, dest)
        print("header %s" % rel)
    if packed_include:
        out.append(("session_compile", "-I@PACK@/include"))
    out += [("session_link", "-Wl,--disable-new-dtags"), ("session_link", "-Wl,-rpath,@PACK@/lib")]
    with open(os.path.join(out_build, "python-build-info.txt"), "w") as f:
        f.writelines("%s\t%s\n" % kw for kw in out)
    with open(build_info_py) as f:
        text = f.read()
    text, n = re.subn(r'^SOURCE_DIR = .*$', 'SOURCE_DIR = "@SRC@"', text, flags=re.M)
    if n != 1:
        die("%s: no SOURCE_DIR line" % build_info_py)
    with open(os.path.join(out_build, "python", "goldminer", "_build_info.py"), "w") as f:
        f.write(text)
    print("wrote %s" % os.path.join(out_build, "python-build-info.txt"))


if __name__ == "__main__":
    main(sys.argv)
