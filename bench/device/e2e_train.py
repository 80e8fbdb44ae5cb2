#!/usr/bin/env python3
"""End-to-end training benchmark: a model trained on a GPU (or, as a
self-check, on the CPU) fed by three input pipelines, each measured in this
one run:

  (a) dataloader-slot  torch's DataLoader, the trainer and its
                       num_workers = SLOT workers confined to the SLOT cores
                       (a fragmented GPU slot's share of the node)
  (b) dataloader-wide  the same on WIDE cores, num_workers = WIDE
  (c) goldminer        the trainer on the SLOT cores, a goldminer.Session
                       listening; K goldminer-dw processes started here, each
                       bound to one of the OTHER cores (round robin)

for two models (e2e_models.py): a DLRM-style one on generated Criteo rows
(bench/dataplane/gen_criteo.py) preprocessed by criteo.pt, and a
ResNet-50-style one on the JPEGs of SHARED_DATA/datasets/images_jpeg
(DataLoader: decode + RandomResizedCrop box + jpeg.pt's one(); goldminer:
the jpeg reader's resized-crop:224 decode + jpeg.pt's normalizing).

Per case: training samples/s over --steps timed steps after --warmup steps,
the GPU's busy share (CUDA events around forward + backward + optimizer step,
summed, over the timed wall time; on the CPU the step's own wall time), the
trainer's wait for data (time in next() over the wall time); then the ratios
(c)/(a) and (c)/(b). One JSON line per case to --json.

Each case (its workers' start, warm-up and timed steps) is bounded by
--case-timeout seconds (a case past it after the warm-up reports the steps it
timed, marked "cut"; one past it before fails). Defaults on one H100 with 16
cores: expected about 1-2 minutes for all six cases with set-up (CUDA,
140,000 generated Criteo rows, the programs); at most 6 x 40 s of cases plus
set-up.

usage: e2e_train.py [--device cuda|cpu] [--models dlrm,resnet] [--slot-cores 2]
         [--wide-cores 12] [--workers K] [--steps S] [--warmup W] [--batch-dlrm 4096]
         [--batch-resnet 64] [--rows N] [--dw PATH] [--programs-dir DIR]
         [--shared-data DIR] [--json FILE] [--resnet-width 64] [--resnet-depth 3,4,6,3]
         [--case-timeout 40]
"""
import argparse
import json
import os
import secrets
import signal
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "bench", "dataplane"))
sys.path.insert(0, HERE)
from dataloader_compare import CriteoBatches  # noqa: E402
import e2e_models  # noqa: E402


def die(msg):
    sys.exit(f"e2e_train.py: {msg}")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None,
                    help="where the model trains (default: cuda if available)")
    ap.add_argument("--models", default="dlrm,resnet", help="comma list of dlrm, resnet")
    ap.add_argument("--slot-cores", type=int, default=2)
    ap.add_argument("--wide-cores", type=int, default=12)
    ap.add_argument("--workers", type=int, default=None, help="goldminer-dw processes (default: cores - slot)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default: dlrm 30, resnet 40)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch-dlrm", type=int, default=4096)
    ap.add_argument("--batch-resnet", type=int, default=64)
    ap.add_argument("--rows", type=int, default=None, help="generated Criteo rows (default: one epoch of the steps)")
    ap.add_argument("--dw", help="goldminer-dw (default: $GOLDMINER_DW_PROGRAM, else the package's own choice)")
    ap.add_argument("--programs-dir", help="a folder with a ready criteo.pt and jpeg.pt (default: scripted here)")
    ap.add_argument("--shared-data", default=os.path.join(SRC, "..", "shared", "data"))
    ap.add_argument("--json", help="append one JSON line per case to this file")
    ap.add_argument("--resnet-width", type=int, default=64)
    ap.add_argument("--resnet-depth", default="3,4,6,3", help="bottleneck blocks per stage")
    ap.add_argument("--case-timeout", type=float, default=40.0,
                    help="seconds per case: workers' start, warm-up and timed steps")
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds for the whole run (0: none): cases are shortened to fit, then skipped")
    ap.add_argument("--amp", choices=["on", "off"], default=None,
                    help="bfloat16 autocast in the step (default: on with cuda)")
    a = ap.parse_args()
    if a.device is None:
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cuda" and not torch.cuda.is_available():
        die(f"--device cuda: torch {torch.__version__} sees no CUDA device (--device cpu for the CPU stand-in)")
    a.amp = (a.amp or ("on" if a.device == "cuda" else "off")) == "on"
    a.models = [m for m in a.models.split(",") if m]
    for m in a.models:
        if m not in ("dlrm", "resnet"):
            die(f"--models: unknown model {m!r} (dlrm, resnet)")
    try:
        a.resnet_depth = [int(x) for x in a.resnet_depth.split(",")]
    except ValueError:
        die(f"--resnet-depth: {a.resnet_depth!r} is not a comma list of integers")
    cores = sorted(os.sched_getaffinity(0))
    n = len(cores)
    for name, v in (("--slot-cores", a.slot_cores), ("--wide-cores", a.wide_cores)):
        if v < 1 or v > n:
            die(f"{name} {v}: this machine lets this process use {n} cores ({cores}); give 1..{n}")
    if a.slot_cores >= n:
        die(f"--slot-cores {a.slot_cores}: no core is left for goldminer's workers (this process may use {n} cores)")
    a.cores, a.slot, a.wide, a.other = cores, cores[:a.slot_cores], cores[:a.wide_cores], cores[a.slot_cores:]
    if a.workers is None:
        a.workers = len(a.other)
    if a.workers < 1:
        die(f"--workers {a.workers}: at least 1")
    for name, v in (("--steps", a.steps), ("--warmup", a.warmup), ("--batch-dlrm", a.batch_dlrm),
                    ("--batch-resnet", a.batch_resnet), ("--rows", a.rows)):
        if v is not None and v < (0 if name == "--warmup" else 1):
            die(f"{name} {v}: too small")
    a.dw = a.dw or os.environ.get("GOLDMINER_DW_PROGRAM") or shutil.which("goldminer-dw")
    if not a.dw:
        die("goldminer-dw not found: give --dw PATH or set GOLDMINER_DW_PROGRAM")
    if not (os.path.isfile(a.dw) and os.access(a.dw, os.X_OK)):
        die(f"--dw / GOLDMINER_DW_PROGRAM: {a.dw} is not an executable file")
    return a


def prepare(a, tmp):
    """The programs and the data; returns {model: (why skipped or None)}."""
    progs = a.programs_dir
    if progs:
        for p in ("criteo.pt", "jpeg.pt"):
            if not os.path.isfile(os.path.join(progs, p)):
                die(f"--programs-dir: {os.path.join(progs, p)} missing")
    else:
        progs = os.path.join(tmp, "programs")
        subprocess.run([sys.executable, os.path.join(SRC, "bench", "dataplane", "make_programs.py"), progs], check=True)
    a.criteo_pt, a.jpeg_pt = os.path.join(progs, "criteo.pt"), os.path.join(progs, "jpeg.pt")
    skip = {}
    if "dlrm" in a.models:
        steps = a.steps or 30
        rows = a.rows or (steps + a.warmup + 1) * a.batch_dlrm  # one epoch: no restart
        a.tsv = os.path.join(tmp, "criteo.tsv")
        t0 = time.monotonic()
        subprocess.run([sys.executable, os.path.join(SRC, "bench", "dataplane", "gen_criteo.py"), a.tsv, str(rows), "1"],
                       check=True)
        print(f"e2e_train.py: {rows} Criteo rows generated in {time.monotonic() - t0:.1f} s", flush=True)
        a.rows = rows
    if "resnet" in a.models:
        folder = os.path.join(a.shared_data, "datasets", "images_jpeg")
        decoder, why = e2e_models.jpeg_decoder()
        if not os.path.isdir(folder):
            skip["resnet"] = f"{folder} is absent (the shared data set is not on this machine)"
        elif decoder is None:
            skip["resnet"] = f"the DataLoader side has no JPEG decoder ({why})"
        else:
            a.jpeg_files, a.decoder, a.jpeg_dir = e2e_models.jpeg_files(folder), decoder, folder
            if not a.jpeg_files:
                skip["resnet"] = f"{folder} holds no .jpg/.jpeg files"
            else:  # the folder R times, so that one epoch covers the steps (no restart)
                a.jpeg_repeat = -(-(a.warmup + (a.steps or 40) + 1) * a.batch_resnet // len(a.jpeg_files))
    return skip


def make_model(a, model):
    torch.manual_seed(0)
    if model == "dlrm":
        net = e2e_models.DLRM()
        dense = [p for n, p in net.named_parameters() if not n.startswith("tables.")]
        opts = [torch.optim.SGD(net.tables.parameters(), lr=0.01), torch.optim.Adam(dense, lr=1e-3)]
    else:
        net = e2e_models.ResNet(a.resnet_width, a.resnet_depth)
        if a.device == "cuda":
            net = net.to(memory_format=torch.channels_last)
        opts = [torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)]
    return net.to(a.device), opts


class Step:
    """forward + backward + optimizer step, timed: CUDA events per step, or
    the step's wall time on the CPU."""

    def __init__(self, a, net, opts, model):
        self.a, self.net, self.opts, self.model = a, net, opts, model
        self.cuda = a.device == "cuda"
        self.events, self.cpu_busy = [], 0.0

    def __call__(self, batch, timed):
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        for o in self.opts:
            o.zero_grad(set_to_none=True)
        with torch.autocast(device_type=self.a.device, dtype=torch.bfloat16, enabled=self.a.amp):
            if self.model == "resnet" and self.cuda:
                batch = (batch[0].contiguous(memory_format=torch.channels_last),)
            loss = self.net.loss(batch)
        loss.backward()
        for o in self.opts:
            o.step()
        if timed:
            if self.cuda:
                end.record()
                self.events.append((start, end))
            else:
                self.cpu_busy += time.perf_counter() - t0

    def busy_seconds(self):
        if self.cuda:
            torch.cuda.synchronize()
            return sum(s.elapsed_time(e) for s, e in self.events) / 1000.0
        return self.cpu_busy


def to_device(a, batch):
    batch = tuple(batch)
    if a.device == "cpu" or batch[0].is_cuda:
        return batch
    return tuple(t.to(a.device, non_blocking=True) for t in batch)


def train(a, model, batches, restart, deadline):
    """Warm-up then timed steps over `batches` (an iterator; restart() gives
    the next epoch's at its end). Returns the measurements."""
    net, opts = make_model(a, model)
    step = Step(a, net, opts, model)
    steps = a.steps or (30 if model == "dlrm" else 40)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    samples = timed = 0
    wait = 0.0
    epochs = 0
    t_start = None
    for i in range(a.warmup + steps):
        if i == a.warmup:
            sync()
            t_start = time.monotonic()
        t0 = time.monotonic()
        try:
            batch = next(batches)
        except StopIteration:
            epochs += 1
            batches = restart()
            batch = next(batches)
        batch = to_device(a, batch)
        if i >= a.warmup:
            wait += time.monotonic() - t0
        step(batch, i >= a.warmup)
        if i >= a.warmup:
            samples += batch[0].shape[0]
            timed += 1
        if time.monotonic() > deadline:
            break
    if t_start is None:
        raise RuntimeError(f"the case's {a.case_limit:.0f} s (--case-timeout, --budget) passed before the "
                           f"{a.warmup} warm-up steps were done")
    sync()
    wall = time.monotonic() - t_start
    if timed == 0:
        raise RuntimeError("no step was timed")
    return {"samples": samples, "steps": timed, "seconds": wall, "samples_per_s": samples / wall,
            "gpu_busy": step.busy_seconds() / wall, "data_wait": wait / wall, "epoch_restarts": epochs,
            "cut": timed < steps}


def dataloader_case(a, model, cores):
    deadline = time.monotonic() + a.case_limit
    os.sched_setaffinity(0, cores)
    torch.set_num_threads(a.slot_cores)  # the same step in every case
    kw = dict(num_workers=len(cores), multiprocessing_context="fork", persistent_workers=True,
              pin_memory=a.device == "cuda", timeout=max(a.case_limit, 10))
    if model == "dlrm":
        loader = torch.utils.data.DataLoader(CriteoBatches(a.tsv, a.criteo_pt, a.batch_dlrm), batch_size=None, **kw)
    else:
        loader = torch.utils.data.DataLoader(e2e_models.JpegCrops(a.jpeg_files * a.jpeg_repeat, a.jpeg_pt, a.decoder),
                                             batch_size=a.batch_resnet, shuffle=True, **kw)
    try:
        # The iterator (and its persistent workers) ends with train().
        return train(a, model, iter(loader), lambda: iter(loader), deadline)
    finally:
        os.sched_setaffinity(0, a.cores)


def goldminer_case(a, model):
    deadline = time.monotonic() + a.case_limit
    import goldminer
    os.sched_setaffinity(0, a.slot)
    torch.set_num_threads(a.slot_cores)
    secret = secrets.token_hex(16)
    if model == "dlrm":
        kw = dict(input="criteo-tsv:" + a.tsv, batch_size=a.batch_dlrm, program=a.criteo_pt,
                  records_per_split=a.batch_dlrm)
    else:
        kw = dict(input="jpeg:" + ",".join([a.jpeg_dir] * a.jpeg_repeat), batch_size=a.batch_resnet, program=a.jpeg_pt,
                  records_per_split=a.batch_resnet, jpeg_decode="resized-crop:224")
    session = goldminer.Session(**kw, workers=0, listen="ucx://127.0.0.1:0", secret=secret,
                                device="cuda" if a.device == "cuda" else None,
                                timeout=max(a.case_limit, 10), first_worker_timeout=60)
    env = dict(os.environ, GOLDMINER_SECRET=secret)
    dw = a.dw
    procs = []
    try:
        for i in range(a.workers):
            core = a.other[i % len(a.other)]
            procs.append(subprocess.Popen(
                [dw, "--trainer", session.address, "--threads", "1", "--intra-op-threads", "1", "--bind", "none",
                 "--id", f"e2e-{i}"], env=env, preexec_fn=lambda c=core: os.sched_setaffinity(0, {c})))
        wait = max(1.0, deadline - time.monotonic())
        try:
            session.wait_for_workers(a.workers, timeout=wait)
        except RuntimeError as e:
            raise RuntimeError(f"goldminer-dw ({dw}) did not all join in {wait:.0f} s: {e}") from e
        return train(a, model, iter(session), lambda: iter(session), deadline)
    except OSError as e:
        raise RuntimeError(f"cannot start goldminer-dw {dw}: {e}") from e
    finally:
        session.close()
        end = time.monotonic() + 15  # the session asked them to leave
        for p in procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        os.sched_setaffinity(0, a.cores)


def fmt_cores(cores):
    return f"{cores[0]}-{cores[-1]}" if len(cores) > 1 and cores[-1] - cores[0] == len(cores) - 1 else \
        ",".join(map(str, cores))


def main():
    # torch 2.x: "`torch.jit.load` is deprecated" in every DataLoader worker.
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.", category=FutureWarning)
    os.environ["PYTHONWARNINGS"] = "ignore::FutureWarning"  # make_programs.py, gen_criteo.py
    a = parse_args()
    # SIGTERM (e.g. timeout(1)) ends the run through the finally blocks: the
    # workers stopped, the temporary files removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("e2e_train.py: terminated (SIGTERM)"))
    os.environ.setdefault("UCX_NET_DEVICES", "lo")
    if a.device == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    tmp = tempfile.mkdtemp(prefix="gm-e2e.")
    jsonf = open(a.json, "a") if a.json else None
    results, failed = [], []
    t_all = time.monotonic()
    try:
        skip = prepare(a, tmp)
        gpu = torch.cuda.get_device_name() if a.device == "cuda" else "none (CPU stand-in)"
        print(f"e2e_train.py: device {a.device} ({gpu}), torch {torch.__version__}, {len(a.cores)} cores; "
              f"slot {fmt_cores(a.slot)}, wide {fmt_cores(a.wide)}, goldminer workers {a.workers} on "
              f"{fmt_cores(a.other)}; warm-up {a.warmup}, amp {'bf16' if a.amp else 'off'}", flush=True)
        for model in a.models:
            if model in skip:
                print(f"e2e_train.py: {model} SKIPPED: {skip[model]}", flush=True)
                continue
            batch = a.batch_dlrm if model == "dlrm" else a.batch_resnet
            for pipeline, run in (("dataloader-slot", lambda: dataloader_case(a, model, a.slot)),
                                  ("dataloader-wide", lambda: dataloader_case(a, model, a.wide)),
                                  ("goldminer", lambda: goldminer_case(a, model))):
                workers = {"dataloader-slot": len(a.slot), "dataloader-wide": len(a.wide)}.get(pipeline, a.workers)
                t0 = time.monotonic()
                left = a.budget - (t0 - t_all) - 10 if a.budget else a.case_timeout  # 10 s for the report
                a.case_limit = min(a.case_timeout, left)
                if a.case_limit < 10:
                    print(f"e2e_train.py: {model} {pipeline} SKIPPED: --budget {a.budget:.0f} s is spent", flush=True)
                    failed.append((model, pipeline))
                    continue
                try:
                    r = run()
                except (RuntimeError, OSError) as e:
                    print(f"e2e_train.py: {model} {pipeline} FAILED: {e}", flush=True)
                    failed.append((model, pipeline))
                    continue
                r.update(model=model, pipeline=pipeline, device=a.device, batch_size=batch, workers=workers,
                         trainer_cores=len(a.wide if pipeline == "dataloader-wide" else a.slot),
                         case_seconds=time.monotonic() - t0, warmup=a.warmup, torch=torch.__version__, amp=a.amp,
                         cores=len(a.cores), goldminer_worker_cores=fmt_cores(a.other))
                results.append(r)
                print(f"e2e_train.py: {model} {pipeline}: {r['samples_per_s']:.0f} samples/s "
                      f"({r['case_seconds']:.1f} s)", flush=True)
                if jsonf:
                    jsonf.write(json.dumps(r) + "\n")
                    jsonf.flush()
        report(a, results, skip, time.monotonic() - t_all)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if jsonf:
            jsonf.close()
    if failed:
        die("failed: " + ", ".join(f"{m} {p}" for m, p in failed))


def report(a, results, skip, seconds):
    busy = "GPU busy" if a.device == "cuda" else "step busy"
    files = getattr(a, "jpeg_files", None)
    jpegs = f";\n  an epoch of images is the folder's {len(files)} JPEGs {a.jpeg_repeat} times" if files else ""
    print(f"\n{'model':<8}{'pipeline':<17}{'cores':>6}{'workers':>8}{'batch':>7}{'steps':>6}"
          f"{'samples/s':>11}{busy:>11}{'data wait':>11}")
    by = {}
    for r in results:
        by[(r["model"], r["pipeline"])] = r
        cores = r["trainer_cores"] if r["pipeline"] != "goldminer" else f"{len(a.slot)}+{len(a.other)}"
        print(f"{r['model']:<8}{r['pipeline']:<17}{cores:>6}{r['workers']:>8}{r['batch_size']:>7}"
              f"{r['steps']:>6}{r['samples_per_s']:>11.0f}{100 * r['gpu_busy']:>10.1f}%"
              f"{100 * r['data_wait']:>10.1f}%{' cut' if r['cut'] else ''}")
    print()
    for model in a.models:
        if model in skip:
            print(f"{model}: skipped: {skip[model]}")
            continue
        c = by.get((model, "goldminer"))
        for base in ("dataloader-slot", "dataloader-wide"):
            b = by.get((model, base))
            if c and b:
                print(f"{model}: goldminer / {base} = {c['samples_per_s'] / b['samples_per_s']:.2f}x samples/s "
                      f"({busy} {100 * c['gpu_busy']:.0f}% vs {100 * b['gpu_busy']:.0f}%)")
    print(f"all cases: {seconds:.0f} s")
    step_note = ("GPU busy = the sum of CUDA-event times around forward + backward + optimizer step over the\n"
                 "  timed wall time (batches already on the GPU: the DataLoader's pinned and copied with\n"
                 "  non_blocking before the step, goldminer's staged by Session(device='cuda'); gaps inside\n"
                 "  a step while the host launches kernels count as busy)"
                 if a.device == "cuda" else
                 "CPU STAND-IN: the 'GPU' step runs on the CPU with the slot's thread count, competing with\n"
                 "  the data workers for the cores; step busy = its wall time over the timed wall time. Not GPU\n"
                 "  figures: a self-check of the pipelines and the measurement only")
    print(f"assumptions: {len(a.cores)} cores; (a) trainer + {len(a.slot)} DataLoader workers on cores "
          f"{fmt_cores(a.slot)}, (b) trainer + {len(a.wide)} workers on {fmt_cores(a.wide)},\n"
          f"  (c) trainer on {fmt_cores(a.slot)} and {a.workers} goldminer-dw (1 thread each) one per core of "
          f"{fmt_cores(a.other)};\n"
          f"  so (c) uses more cores than (a): the comparison is a GPU slot's own cores against borrowing the\n"
          f"  node's idle ones. samples/s over the steps after {a.warmup} warm-up steps (default 30 DLRM,\n"
          f"  40 ResNet; each case at most {a.case_timeout:.0f} s, 'cut' when shorter); one epoch holds the warm-up\n"
          f"  and timed steps (--rows smaller: epochs restart, DataLoader workers persistent){jpegs}.\n"
          f"  data wait = time the trainer spent in next() (and the copy call) over the timed wall time.\n"
          f"  {step_note}.\n"
          f"  Both sides run the same TorchScript programs (criteo.pt, jpeg.pt). DLRM: {a.rows or '-'} generated\n"
          f"  Criteo rows, the DataLoader parses lines in Python; ResNet: DataLoader decodes with "
          f"{getattr(a, 'decoder', '-')} and\n"
          f"  crops + resizes with jpeg.pt's one(), goldminer's reader decodes resized-crop:224 (libjpeg-turbo,\n"
          f"  DCT-scaled). Pseudo-labels for the images; {'bf16 autocast' if a.amp else 'fp32'}.")


if __name__ == "__main__":
    main()
