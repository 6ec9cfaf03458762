"""Collectives on 2 ranks of this host: the "neuron" backend on neuron
tensors (through its shared-memory segment, and with TORCHNEURON_DIST_SHM=0
through gloo's TCP) against gloo on CPU tensors of the same size, in the
same run.

    python benchmarks/collectives.py            # 4 KiB .. 64 MiB, and the DDP step
    python benchmarks/collectives.py --quick    # 4 KiB .. 4 MiB, fewer repeats
    python benchmarks/collectives.py --sizes 16,32,64 --ddp-rounds 3   # MiB

Prints bus bandwidth (NCCL's convention: all_reduce moves 2 (n-1)/n of the
buffer per rank, all_gather, reduce_scatter and all_to_all (n-1)/n of the
whole) per size, medians of repeats taken turn by turn (shm, neuron on
gloo, gloo CPU, shm, ...), and the ratios; then the demo GPT's DDP training
step on 2 ranks (examples/ddp_train.py under torchrun) on neuron with and
without the segment, with the collectives on the caller's stream
(TORCHNEURON_DIST_OWN_STREAM=0, as before each group had streams of its
own), and on CPU with gloo, turn by turn.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from timing import cpu_model

WORLD = 2


def timed(fn, device, reps):
    fn()
    if device == "neuron":
        torch.neuron.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    if device == "neuron":
        torch.neuron.synchronize()
    return (time.perf_counter() - start) / reps


PATHS = ("shm", "tcp", "cpu")  # neuron through the segment, neuron through gloo, gloo on CPU


def rank_main(rank, store, sizes, rounds, queue):
    import torchneuron  # noqa: F401

    dist.init_process_group("neuron", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    os.environ["TORCHNEURON_DIST_SHM"] = "0"  # read when a group is made
    groups = {"shm": None, "tcp": dist.new_group(backend="neuron"), "cpu": dist.new_group(backend="gloo")}
    rows = []
    for nbytes in sizes:
        n = nbytes // 4
        res = {}
        for path, group in groups.items():
            device = "cpu" if path == "cpu" else "neuron"
            x = torch.ones(n, device=device)
            out = torch.empty(n * WORLD, device=device)
            part = torch.empty(n // WORLD, device=device)
            swapped = torch.empty(n, device=device)
            res[path] = {
                "all_reduce": lambda x=x, g=group: dist.all_reduce(x, group=g),
                "all_gather": lambda x=x, o=out, g=group: dist.all_gather_into_tensor(o, x, group=g),
                "reduce_scatter": lambda x=x, p=part, g=group: dist.reduce_scatter_tensor(p, x, group=g),
                "all_to_all": lambda x=x, o=swapped, g=group: dist.all_to_all_single(o, x, group=g),
            }
        reps = max(2, min(50, (1 << 24) // max(nbytes, 1)))
        for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
            t = {p: [] for p in PATHS}
            for _ in range(rounds):  # turn by turn
                for path in PATHS:
                    t[path].append(timed(res[path][op], "cpu" if path == "cpu" else "neuron", reps))
            med = {p: statistics.median(v) for p, v in t.items()}
            moved = nbytes * (WORLD if op == "all_gather" else 1)
            factor = 2 * (WORLD - 1) / WORLD if op == "all_reduce" else (WORLD - 1) / WORLD
            rows.append((op, nbytes) + tuple(moved * factor / med[p] / 1e9 for p in PATHS))
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def size_name(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def ddp_step(extra, env=None):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(WORLD),
           os.path.join(root, "examples", "ddp_train.py"), "--steps", "20"] + extra
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=root,
                         env=dict(os.environ, **(env or {})))
    m = re.search(r"([0-9,]+) tokens/s", out.stdout)
    if out.returncode or not m:
        raise RuntimeError(out.stdout + out.stderr)
    return float(m.group(1).replace(",", ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-ddp", action="store_true", help="skip the DDP training step")
    ap.add_argument("--sizes", help="comma-separated sizes in MiB instead of the powers of 4")
    ap.add_argument("--ddp-rounds", type=int, default=3, help="DDP runs per path, turn by turn")
    args = ap.parse_args()
    top = 22 if args.quick else 26
    sizes = [1 << k for k in range(12, top + 1, 2)]
    if args.sizes:
        sizes = [int(float(v) * (1 << 20)) for v in args.sizes.split(",")]
    rounds = 3 if args.quick else 5
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        queue = mp.get_context("spawn").SimpleQueue()
        mp.spawn(rank_main, args=(os.path.join(d, "store"), sizes, rounds, queue), nprocs=WORLD)
        rows = queue.get()
    print(f"host: {cpu_model()}, {os.cpu_count()} cores; {WORLD} ranks; medians of {rounds} "
          "rounds taken turn by turn")
    print("\n| collective | size | neuron shm GB/s | neuron gloo GB/s | gloo CPU GB/s | shm / gloo CPU "
          "| shm / neuron gloo |\n|---|---:|---:|---:|---:|---:|---:|")
    for op, nbytes, shm, tcp, cpu_bus in rows:
        print(f"| {op} | {size_name(nbytes)} | {shm:.3f} | {tcp:.3f} | {cpu_bus:.3f} | {shm / cpu_bus:.2f} "
              f"| {shm / tcp:.2f} |")
    if not args.no_ddp:
        # "caller": the collectives on the caller's stream, as before the
        # group had streams of its own (no overlap with the backward)
        runs = {"shm": ([], {"TORCHNEURON_DIST_SHM": "1"}), "tcp": ([], {"TORCHNEURON_DIST_SHM": "0"}),
                "caller": ([], {"TORCHNEURON_DIST_SHM": "1", "TORCHNEURON_DIST_OWN_STREAM": "0"}),
                "cpu": (["--device", "cpu", "--backend", "gloo"], {})}
        tps = {p: [] for p in runs}
        for _ in range(args.ddp_rounds):  # turn by turn
            for p, (extra, env) in runs.items():
                tps[p].append(ddp_step(extra, env))
        med = {p: statistics.median(v) for p, v in tps.items()}
        print(f"\nDDP training step, demo GPT, {WORLD} ranks, medians of {args.ddp_rounds} runs: neuron shm "
              f"{med['shm']:,.0f} tokens/s, neuron gloo {med['tcp']:,.0f}, gloo CPU {med['cpu']:,.0f}; "
              f"shm / gloo CPU {med['shm'] / med['cpu']:.2f}, shm / neuron gloo {med['shm'] / med['tcp']:.2f}; the "
              f"collectives on the caller's stream (TORCHNEURON_DIST_OWN_STREAM=0, as before) "
              f"{med['caller']:,.0f}, shm / that {med['shm'] / med['caller']:.2f}")


if __name__ == "__main__":
    main()
