#!/usr/bin/env python3
"""Seeded generator of a Criteo-like raw TSV (the format of Criteo's
day_N files): label, I1..I13 (integers, counts with a heavy tail, some
negative), C1..C26 (8 hex digits), each field missing with a per-column
probability; LF line ends, no header.

usage: gen_criteo.py OUT ROWS [SEED]
"""
import random
import sys


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    out, rows = sys.argv[1], int(sys.argv[2])
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) == 4 else 1)
    # Per-column missing rates and vocabularies, like the real data: a few
    # dense columns are mostly empty, categorical vocabularies range from
    # tens to millions of ids.
    dense_missing = [rng.choice([0.0, 0.05, 0.2, 0.45]) for _ in range(13)]
    sparse_missing = [rng.choice([0.0, 0.0, 0.03, 0.4]) for _ in range(26)]
    vocab = [[f"{rng.getrandbits(32):08x}" for _ in range(rng.choice([4, 30, 500, 5000]))] for _ in range(26)]
    with open(out, "w") as f:
        for _ in range(rows):
            fields = ["1" if rng.random() < 0.25 else "0"]
            for c in range(13):
                if rng.random() < dense_missing[c]:
                    fields.append("")
                else:
                    fields.append(str(int(rng.expovariate(0.05)) - (2 if c == 1 else 0)))
            for c in range(26):
                fields.append("" if rng.random() < sparse_missing[c] else rng.choice(vocab[c]))
            f.write("\t".join(fields) + "\n")


if __name__ == "__main__":
    main()
