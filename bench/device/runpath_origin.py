#!/usr/bin/env python3
"""Points the DT_RUNPATH / DT_RPATH of packed shared libraries at their own
folder ($ORIGIN), in place, so that a library that names its build
machine's folder (Debian's Open MPI: /usr/lib/x86_64-linux-gnu/openmpi/lib)
finds its dependencies beside it in the pack (bench/device/cuda_checks.sh
pack). A RUNPATH also stops the loader from using the RPATH of the object
that loaded the library, so without this its dependencies would be looked
for on the target's system only.

The path is a string in .dynstr; it is overwritten with the new one and NUL
bytes (no other byte of the file moves), which needs the old string to be at
least as long.

usage: runpath_origin.py [--value RUNPATH] LIB...   (default: $ORIGIN; UCX's
  modules in lib/ucx get "$ORIGIN:$ORIGIN/..") prints one line per library
  it changed."""
import re
import subprocess
import sys


def die(message):
    sys.exit("runpath_origin.py: " + message)


def main(args):
    new = "$ORIGIN"
    if args[:1] == ["--value"] and len(args) > 1:
        new, args = args[1], args[2:]
    for path in args:
        dyn = subprocess.run(["readelf", "-dW", path], check=True, capture_output=True, text=True).stdout
        m = re.search(r"\((RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", dyn)
        if not m or m.group(2) == new:
            continue
        old = m.group(2).encode()
        sections = subprocess.run(["readelf", "-SW", path], check=True, capture_output=True, text=True).stdout
        s = re.search(r"\]\s+\.dynstr\s+STRTAB\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", sections)
        if not s:
            die("%s: no .dynstr section" % path)
        start, size = int(s.group(1), 16), int(s.group(2), 16)
        with open(path, "r+b") as f:
            f.seek(start)
            table = f.read(size)
            at = table.find(b"\0" + old + b"\0")
            if at < 0 or table.find(b"\0" + old + b"\0", at + 1) >= 0 or len(old) < len(new):
                die("%s: cannot rewrite %s %r in place" % (path, m.group(1), m.group(2)))
            f.seek(start + at + 1)
            f.write(new.encode() + b"\0" * (len(old) - len(new)))
        print("%s: %s %s -> %s" % (path, m.group(1), m.group(2), new))


if __name__ == "__main__":
    main(sys.argv[1:])
