"""python -m goldminer --version: what this goldminer package is and what it
runs with: its version, the torch it imports (version and path), the
Python, the goldminer-dw it names with the libtorch that links, and whether
goldminer.split is the prebuilt extension or compiled on first use (and
where it is cached)."""
import argparse
import os
import shutil
import sys


def version_lines():
    try:
        from goldminer import _build_info
    except ImportError:
        raise SystemExit("python -m goldminer: %s has no _build_info.py (make writes it): use the package "
                         "staged in BUILD/python or an installed one" % os.path.dirname(os.path.abspath(__file__)))
    from goldminer import _split_build

    lines = ["goldminer %s" % _build_info.VERSION]
    try:
        import torch
    except ImportError as e:
        torch = None
        lines.append("torch: not importable (%s)" % e)
    else:
        lines.append("torch %s (%s)" % (torch.__version__, os.path.dirname(os.path.abspath(torch.__file__))))
    lines.append("python %s (%s)" % (sys.version.split()[0], sys.executable))
    # The one goldminer.Session starts: $GOLDMINER_DW_PROGRAM, else beside
    # the package, the executable or the configured bindir, else PATH's.
    from goldminer import _session
    dw = _session.dw_program()
    dw = os.path.normpath(dw) if os.sep in dw else dw
    found = "" if shutil.which(dw) else (", not found: install GoldMiner, put its bindir on PATH or set "
                                         "GOLDMINER_DW_PROGRAM")
    lines.append("goldminer-dw %s (%s%s)" % (dw, "libtorch " + _build_info.LIBTORCH_VERSION
                                             if _build_info.LIBTORCH_VERSION else "no libtorch", found))
    if torch is None:
        lines.append("split: needs torch")
    elif _split_build.prebuilt_matches():
        lines.append("split: prebuilt for torch %s" % _build_info.SPLIT_TORCH_VERSION)
    else:
        lines.append("split: compiled on first use for torch %s (cache %s)" % (torch.__version__,
                                                                              _split_build.cache_dir()))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m goldminer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="store_true", help="print what this package is and runs with")
    args = parser.parse_args(argv)
    if not args.version:
        parser.print_help()
        return 2
    print("\n".join(version_lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
