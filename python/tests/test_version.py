"""`python -m goldminer --version`, as a user runs it, against what this
process imports: the package's version, this torch and Python, the
goldminer-dw that $GOLDMINER_DW_PROGRAM names (conftest.py sets it) and how
goldminer.split is had."""
import os
import subprocess
import sys

import torch

from goldminer import _build_info, _session, _split_build


def test_names_the_package_torch_python_worker_and_split(dw_program):
    out = subprocess.run([sys.executable, "-m", "goldminer", "--version"], check=True, capture_output=True,
                         text=True, timeout=120).stdout.splitlines()
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    libtorch = "libtorch " + _session.LIBTORCH_VERSION if _session.LIBTORCH_VERSION else "no libtorch"
    assert out[:4] == ["goldminer " + _build_info.VERSION,
                       "torch %s (%s)" % (torch.__version__, torch_dir),
                       "python %s (%s)" % (sys.version.split()[0], sys.executable),
                       "goldminer-dw %s (%s)" % (os.path.normpath(dw_program), libtorch)]
    split = ("split: prebuilt for torch " + torch.__version__ if _split_build.prebuilt_matches()
             else "split: compiled on first use for torch " + torch.__version__)
    assert len(out) > 4 and out[4].startswith(split), out
