"""The trainer of test_security.sh: opens its session (goldminer.Session
reads GOLDMINER_LISTEN and GOLDMINER_AUTH from the --goldminer job), waits
until the intruder processes given by pid have ended (each refused by munge),
then takes EPOCHS epochs and prints, per epoch, its samples and distinct
samples.

Usage: sec_trainer.py INPUT EPOCHS PID...
"""
import os
import sys
import time

import goldminer


def running(pid: int) -> bool:
    """True while pid runs (a zombie has ended)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main() -> None:
    spec, epochs, pids = sys.argv[1], int(sys.argv[2]), [int(p) for p in sys.argv[3:]]
    with goldminer.Session(spec, batch_size=50) as s:
        deadline = time.time() + 60
        while any(running(p) for p in pids):
            if time.time() > deadline:
                sys.exit("sec_trainer: the intruders did not end within 60 s")
            time.sleep(0.1)
        for epoch in range(epochs):
            ids = []
            for _ in s:
                ids.extend((int(f), int(r)) for f, r in s.last_sample_ids.tolist())
            print("epoch %d samples %d unique %d" % (epoch, len(ids), len(set(ids))), flush=True)


if __name__ == "__main__":
    main()
