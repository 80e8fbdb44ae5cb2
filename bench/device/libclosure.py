#!/usr/bin/env python3
"""The shared libraries that bench/device/pack.sh carries with goldminer's
binaries to a machine without our Debian packages, and stand-ins ("stubs")
for those that are not worth carrying.

Walks DT_NEEDED from the given ELF files (resolved the way this machine's
loader resolves them, via ldd) and sorts each library into:
  system  the glibc/GCC runtime family (libc, libm, libdl, libpthread, librt,
          ld-linux, libstdc++, libgcc_s, ...): the target's own is used;
  keep    a library some carried object imports a symbol from: copied;
  stub    a library no carried object imports anything from (Debian's
          libtorch 1.13 is linked against OpenCV, FFmpeg, ZeroMQ, ... and uses
          none of them), or one named with --stub: replaced by a small library
          with the same SONAME that defines the symbols the carried objects
          import from it; each function prints its name and aborts, so a call
          that was not expected fails loudly instead of computing garbage.
A stub has no dependencies, so what only it needed is not carried either.

usage: libclosure.py OUTDIR [--stub SONAME_PREFIX]... ELF...
  writes OUTDIR/<soname> for every kept library (a copy) and every stub (built
  with cc), and prints one line per library: keep|stub|system SONAME PATH [why].
"""
import argparse
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile

SYSTEM = re.compile(r"^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|ld-linux-x86-64|"
                    r"libstdc\+\+|libgcc_s)\.so")


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def resolved(elf):
    """SONAME -> path, as the loader on this machine resolves elf's closure."""
    out = {}
    for line in run("ldd", elf).splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            out[m.group(1)] = m.group(2)
        elif "not found" in line:
            sys.exit(f"libclosure.py: {elf}: {line.strip()}")
    return out


@functools.lru_cache(maxsize=None)
def needed(elf):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", run("readelf", "-dW", elf))


@functools.lru_cache(maxsize=None)
def dynsyms(elf):
    """(name, version, type, bind, size, defined, default version) per dynamic symbol."""
    syms = []
    for line in run("readelf", "--dyn-syms", "-W", elf).splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":") or not f[0][:-1].isdigit():
            continue
        name, _, version = f[7].partition("@")
        version = version.lstrip("@").split(" ")[0]
        size = int(f[2], 0) if f[2].startswith("0x") else int(f[2])
        syms.append((name, version, f[3], f[4], size, f[6] != "UND", f[7].count("@") == 2 or "@" not in f[7]))
    return syms


@functools.lru_cache(maxsize=None)
def imports(elf):
    return {(s[0], s[1]) for s in dynsyms(elf) if not s[5] and s[0]}


STUB_C = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((visibility("hidden"), noreturn, used)) void gm_stub_called(const char* name) {
  static const char a[] = "goldminer devpack: " SONAME ": ";
  static const char b[] = " was called, but this library is a stub (bench/device/pack.sh "
                          "carries a stand-in for it); carry the real library\n";
  if (write(2, a, sizeof a - 1) < 0 || write(2, name, strlen(name)) < 0 || write(2, b, sizeof b - 1) < 0) {}
  abort();
}
"""


def build_stub(soname, real, wanted, outdir, cc):
    """A library named soname defining the symbols of `wanted` that `real`
    defines, with real's types, sizes and versions."""
    defs = {}
    for name, version, typ, bind, size, defined, default in dynsyms(real):
        if defined and name and (name, version) in wanted or (defined and (name, "") in wanted and default):
            defs[(name, version)] = (typ, bind, size, default)
    asm, vers = [".text"], {}
    for i, ((name, version), (typ, bind, size, default)) in enumerate(sorted(defs.items())):
        label = f"gm_stub_{i}" if version and not default else name
        directive = ".weak" if bind == "WEAK" else ".globl"
        if typ in ("FUNC", "IFUNC", "NOTYPE"):
            asm += [f".section .rodata.str1.1,\"aMS\",@progbits,1", f".Lname{i}: .asciz \"{name}\"", ".text",
                    f"{directive} {label}", f".type {label}, @function", f"{label}:",
                    f"  leaq .Lname{i}(%rip), %rdi", "  jmp gm_stub_called", f".size {label}, .-{label}"]
        elif typ == "OBJECT":
            asm += [".data", ".balign 32", f"{directive} {label}", f".type {label}, @object",
                    f".size {label}, {size}", f"{label}:", f"  .zero {max(size, 1)}", ".text"]
        else:
            sys.exit(f"libclosure.py: {real}: cannot stub {name} (symbol type {typ})")
        if version:
            if default:
                vers.setdefault(version, []).append(name)
            else:
                asm.append(f".symver {label}, {name}@{version}")
                vers.setdefault(version, [])
    with tempfile.TemporaryDirectory() as tmp:
        with open(f"{tmp}/stub.S", "w") as f:
            f.write("\n".join(asm) + "\n.section .note.GNU-stack,\"\",@progbits\n")
        with open(f"{tmp}/stub.c", "w") as f:
            f.write(STUB_C)
        with open(f"{tmp}/stub.map", "w") as f:
            if vers:
                for i, (v, names) in enumerate(vers.items()):
                    listed = "".join(f'    "{n}";\n' for n in names)
                    f.write(v + " {\n" + (f"  global:\n{listed}" if listed else "") +
                            ("  local: *;\n" if i == len(vers) - 1 else "") + "};\n")
            else:
                names = "".join(f'    "{n}";\n' for n, _ in defs)
                f.write("{\n" + (f"  global:\n{names}" if names else "") + "  local: *;\n};\n")
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", f'-DSONAME="{soname}"',
                        "-o", os.path.join(outdir, soname), f"{tmp}/stub.S", f"{tmp}/stub.c",
                        f"-Wl,-soname,{soname}", f"-Wl,--version-script={tmp}/stub.map"], check=True)
    return len(defs)


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("outdir")
    ap.add_argument("--stub", action="append", default=[], help="SONAME prefix to stub even if used")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("elf", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)

    paths = {}
    for elf in a.elf:
        paths.update(resolved(elf))
    # Breadth-first over "p imports a symbol that n defines" edges only: a
    # NEEDED entry nothing is imported from is over-linking.
    roots = {os.path.basename(e) for e in a.elf}
    kept, stubs, system, wanted = [], {}, {}, {}
    todo, seen = list(a.elf), set()
    while todo:
        p = todo.pop(0)
        imp = imports(p)
        for n in needed(p):
            if n in roots:  # carried anyway (a UCX module needing another)
                continue
            if SYSTEM.match(n):
                system[n] = paths.get(n, "")
                continue
            path = paths[n]
            defined = {(s[0], s[1]) for s in dynsyms(path) if s[5]} | \
                      {(s[0], "") for s in dynsyms(path) if s[5] and s[6]}
            used = imp & defined
            wanted.setdefault(n, set()).update(used)
            forced = any(n.startswith(s) for s in a.stub)
            if used and not forced and n not in seen:
                seen.add(n)
                stubs.pop(n, None)
                kept.append(n)
                todo.append(path)
            elif n not in seen and n not in stubs:
                stubs[n] = "named with --stub" if forced else f"nothing imported from it by {os.path.basename(p)}"
    for n in stubs:
        if n in seen:
            continue
        count = build_stub(n, paths[n], wanted.get(n, set()), a.outdir, a.cc)
        print(f"stub {n} {paths[n]} {count} symbols; {stubs[n]}")
    for n in kept:
        shutil.copyfile(paths[n], os.path.join(a.outdir, n))
        print(f"keep {n} {os.path.realpath(paths[n])}")
    for n, p in sorted(system.items()):
        print(f"system {n} {p}")


if __name__ == "__main__":
    main()
