"""goldminer.split's cache of compiled splits, attacked as another user of
a shared cache would: a planted .so in the folder the split is loaded from
(owned by someone else), and a cache anyone may write. Each is refused
with an error naming the path, its owner and mode, before anything is
loaded; a private cache passes the check. Prints one line per case, then
OK."""
import os
import sys
import tempfile

from goldminer import _split_build


def planted(cache, owner, cache_mode):
    """A file where the compiled split for this torch would be, owned by
    `owner`, in `cache` with `cache_mode`; returns what loading says."""
    os.environ["GOLDMINER_CACHE_DIR"] = cache
    _, folder, target = _split_build._paths()
    os.makedirs(folder, mode=0o755)
    with open(target, "wb") as f:
        f.write(b"\x7fELF not a split")  # would fail to load, with another message
    os.chown(target, owner, owner)
    os.chown(folder, owner, owner)
    os.chmod(cache, cache_mode)
    try:
        _split_build._compiled()
    except RuntimeError as e:
        return str(e)
    return "loaded"


root = os.geteuid() == 0
with tempfile.TemporaryDirectory() as tmp:
    if root:
        said = planted(os.path.join(tmp, "a"), 65534, 0o755)
        print("another user's split refused: %s" % ("owned by uid 65534" in said and "the folder of the split" in said))
        print(said)
    else:
        print("another user's split refused: skipped (needs root to chown)")
    said = planted(os.path.join(tmp, "b"), os.geteuid(), 0o777)
    print("a cache anyone may write refused: %s" % ("the cache directory" in said and "mode 777" in said))
    print(said)
    private = os.path.join(tmp, "c")
    os.makedirs(private, mode=0o700)
    _split_build.check_private(private, "the cache directory")
    print("a private cache passes: True")
print("\nOK")
sys.exit(0)
