"""python -m goldminer --version, as a user runs it, against what this
process imports: the package's version, this torch and Python, the
goldminer-dw that $GOLDMINER_DW_PROGRAM names (the test sets it) and how
goldminer.split is had. Prints one line per fact checked, then OK."""
import os
import subprocess
import sys

import torch

import goldminer
from goldminer import _build_info, _session, _split_build

out = subprocess.run([sys.executable, "-m", "goldminer", "--version"], check=True, capture_output=True,
                     text=True).stdout.splitlines()
torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
dw = os.path.normpath(os.environ["GOLDMINER_DW_PROGRAM"])
libtorch = "libtorch " + _session.LIBTORCH_VERSION if _session.LIBTORCH_VERSION else "no libtorch"
split = ("split: prebuilt for torch " + torch.__version__ if _split_build.prebuilt_matches()
         else "split: compiled on first use for torch " + torch.__version__)
expected = ["goldminer " + _build_info.VERSION, "torch %s (%s)" % (torch.__version__, torch_dir),
            "python %s (%s)" % (sys.version.split()[0], sys.executable), "goldminer-dw %s (%s)" % (dw, libtorch)]
for i, line in enumerate(expected):
    print("line %d as expected: %s" % (i + 1, out[i] == line if i < len(out) else False))
print("split line: %s" % (len(out) > 4 and out[4].startswith(split)))
print("package imported from: %s" % os.path.dirname(goldminer.__file__))
print("\nOK" if out[:4] == expected and out[4].startswith(split) else "\nMISMATCH:\n" + "\n".join(out))
