"""The inputs and batch checks the goldminer.Session tests share: small
text-line and Criteo-like TSV files written into a test's folder, what each
record must decode to, and a count of the samples an epoch delivered.

Text files: TEXT_RECORDS lines each (empty lines, CRLF endings and lines of
every length among them); Criteo files: CRITEO_RECORDS rows each (missing
dense and categorical values, short rows). Sessions read them in splits of
SPLIT records and batches of BATCH, so every split ends in a short batch."""
import os

import torch

import goldminer

BATCH = 64
SPLIT = 100  # records per split: several splits per file, a short last batch per split
TEXT_RECORDS = [1000, 537]
CRITEO_RECORDS = [600, 411]
TRANSPORTS = ["ucx", "local"]


# ---------------------------------------------------------------- input data
def text_line(f, r):
    if r % 97 == 13:
        return ""  # empty lines are records too
    return "f%d-r%d:" % (f, r) + "x" * ((r * 7 + f) % 23)


def write_text(folder):
    """Writes the text files into `folder`; returns the Session input spec."""
    paths = []
    for f, n in enumerate(TEXT_RECORDS):
        path = os.path.join(folder, "lines_%d.txt" % f)
        with open(path, "w") as out:
            for r in range(n):
                out.write(text_line(f, r) + ("\r\n" if r % 5 == 0 else "\n"))
        paths.append(path)
    return "text:" + ",".join(paths)


def criteo_row(f, r):
    """(label, dense[13] (None = missing), sparse[26] (None = missing), fields)."""
    label = float((r + f) % 2)
    dense = [None if (r + j) % 11 == 0 else float((f * 1000 + r * 3 + j) % 50) for j in range(13)]
    sparse = [None if (r * j + f) % 13 == 5 else ((f << 40) ^ (r << 8) ^ j) * 2654435761 % (1 << 48)
              for j in range(26)]
    fields = 40 if r % 17 != 3 else 38  # short rows: trailing categoricals missing
    if fields == 38:
        sparse[24] = sparse[25] = None
    return label, dense, sparse, fields


def criteo_line(f, r):
    label, dense, sparse, fields = criteo_row(f, r)
    parts = ["%d" % label] + ["" if d is None else "%d" % d for d in dense] + \
            ["" if s is None else "%x" % s for s in sparse]
    return "\t".join(parts[:fields])


def write_criteo(folder, corrupt_at=None):
    """Writes the Criteo files into `folder` (the record `corrupt_at`, a
    (file, record) pair, with a field that is not a number); returns the
    Session input spec."""
    paths = []
    for f, n in enumerate(CRITEO_RECORDS):
        path = os.path.join(folder, "day_%d.tsv" % f)
        with open(path, "w") as out:
            for r in range(n):
                line = criteo_line(f, r)
                if corrupt_at == (f, r):
                    line = line.replace("\t", "\tnot-a-number", 1)
                out.write(line + "\n")
        paths.append(path)
    return "criteo-tsv:" + ",".join(paths)


def criteo_expected(f, r):
    """The tensors (label, dense, sparse) record r of file f decodes to."""
    label, dense, sparse, _ = criteo_row(f, r)
    return (torch.tensor(label, dtype=torch.float32),
            torch.tensor([float("nan") if d is None else d for d in dense], dtype=torch.float32),
            torch.tensor([-1 if s is None else s for s in sparse], dtype=torch.int64))


def records(fmt):
    return TEXT_RECORDS if fmt == "text" else CRITEO_RECORDS


def write_input(fmt, folder):
    return write_text(folder) if fmt == "text" else write_criteo(folder)


# ---------------------------------------------------------------- batch checks
def same(a, b):
    """Equal tensors, NaN equal to NaN."""
    if a.dtype.is_floating_point:
        return torch.equal(torch.isnan(a), torch.isnan(b)) and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))
    return torch.equal(a, b)


def check_batch(fmt, batch, ids):
    """Asserts that one batch holds what its sample ids name; returns the
    sample ids as (file, record) tuples."""
    assert isinstance(batch, tuple), "a batch is a %s, not a tuple" % type(batch).__name__
    assert all(isinstance(t, torch.Tensor) for t in batch), "a batch holds something other than tensors"
    assert ids.dtype == torch.int64 and ids.dim() == 2 and ids.shape[1] == 2, \
        "last_sample_ids %s %s" % (ids.dtype, tuple(ids.shape))
    b = ids.shape[0]
    samples = [(int(f), int(r)) for f, r in ids.tolist()]
    if fmt == "text":
        assert len(batch) == 2, "text batch has %d tensors" % len(batch)
        data, lengths = batch
        assert data.dtype == torch.uint8 and data.dim() == 1
        assert lengths.dtype == torch.int64 and tuple(lengths.shape) == (b,)
        assert int(lengths.sum()) == data.numel(), "text lengths do not add up to the data"
        raw = bytes(data.tolist())
        pos = 0
        for (f, r), n in zip(samples, lengths.tolist()):
            line = raw[pos:pos + n].decode()
            pos += n
            assert line == text_line(f, r), "sample (%d, %d)" % (f, r)
    else:
        assert len(batch) == 3, "criteo batch has %d tensors" % len(batch)
        label, dense, sparse = batch
        assert label.dtype == torch.float32 and tuple(label.shape) == (b,)
        assert dense.dtype == torch.float32 and tuple(dense.shape) == (b, 13)
        assert sparse.dtype == torch.int64 and tuple(sparse.shape) == (b, 26)
        for i, (f, r) in enumerate(samples):
            el, ed, es = criteo_expected(f, r)
            assert same(label[i], el) and same(dense[i], ed) and same(sparse[i], es), \
                "sample (%d, %d) decoded as %s %s %s, expected %s %s %s" % (
                    f, r, label[i], dense[i].tolist(), sparse[i].tolist(), el, ed.tolist(), es.tolist())
    return samples


class EpochCount:
    """The samples of one epoch against every record of the input."""

    def __init__(self, fmt):
        self.expected = {(f, r) for f, n in enumerate(records(fmt)) for r in range(n)}
        self.seen = set()
        self.duplicates = 0
        self.samples = 0
        self.batches = 0

    def add(self, samples):
        self.batches += 1
        for s in samples:
            self.samples += 1
            if s in self.seen or s not in self.expected:
                self.duplicates += 1
            self.seen.add(s)

    def missing(self):
        return len(self.expected - self.seen)

    def summary(self):
        """(samples, unique, duplicates, missing)."""
        return self.samples, len(self.seen), self.duplicates, self.missing()


def session(spec, transport, workers, **kw):
    """A Session over `spec` in batches of BATCH and splits of SPLIT (unless given)."""
    kw.setdefault("records_per_split", SPLIT)
    return goldminer.Session(spec, BATCH, workers=workers, transport=transport, **kw)


def consume(s, n=None):
    """Sample ids of up to n batches (all of the epoch when n is None)."""
    ids = []
    for k, _ in enumerate(s):
        ids.extend((int(f), int(r)) for f, r in s.last_sample_ids.tolist())
        if n is not None and k + 1 == n:
            break
    return ids
