"""goldminer.split's cache of compiled splits, attacked as another user of a
shared cache would: a planted .so in the folder the split is loaded from
(owned by someone else), and a cache anyone may write. Each is refused with
an error naming the path, its owner and mode, before anything is loaded; a
private cache passes the checks to the loading."""
import os

import pytest

from goldminer import _split_build


def planted(monkeypatch, cache, owner, cache_mode):
    """A file where the compiled split for this torch would be, owned by
    `owner`, in `cache` with `cache_mode`; returns what loading says."""
    monkeypatch.setenv("GOLDMINER_CACHE_DIR", cache)
    _, folder, target = _split_build._paths()
    os.makedirs(folder, mode=0o755)
    with open(target, "wb") as f:
        f.write(b"\x7fELF not a split")  # would fail to load, with another message
    os.chown(target, owner, owner)
    os.chown(folder, owner, owner)
    os.chmod(cache, cache_mode)
    with pytest.raises(RuntimeError) as e:
        _split_build._compiled()
    return str(e.value)


def test_refuses_a_split_another_user_could_have_planted(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root to chown the planted split to another user")
    said = planted(monkeypatch, os.path.join(tmp_path, "a"), 65534, 0o755)
    assert "owned by uid 65534" in said and "the folder of the split" in said, said


def test_refuses_a_cache_anyone_may_write(tmp_path, monkeypatch):
    said = planted(monkeypatch, os.path.join(tmp_path, "b"), os.geteuid(), 0o777)
    assert "the cache directory" in said and "mode 777" in said, said


def test_a_private_cache_passes(tmp_path, monkeypatch):
    private = os.path.join(tmp_path, "c")
    os.makedirs(private, mode=0o700)
    assert _split_build.check_private(private, "the cache directory") is None
    # A compiled split of one's own, in a folder of one's own, passes too
    # (what is in such a file is then cpp_extension's to check: it rebuilds
    # a file its build did not make).
    folder = os.path.join(private, "split-key")
    os.makedirs(folder, mode=0o700)
    target = os.path.join(folder, "_split.so")
    with open(target, "wb") as f:
        f.write(b"\x7fELF")
    os.chmod(target, 0o600)
    assert _split_build.check_private(folder, "the folder of the split") is None
    assert _split_build.check_private(target, "the compiled split") is None
