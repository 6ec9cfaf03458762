"""Collectives on 2 ranks of this host: the "neuron" backend on neuron
tensors against gloo on CPU tensors of the same size, in the same run.

    python benchmarks/collectives.py            # 4 KiB .. 64 MiB, and the DDP step
    python benchmarks/collectives.py --quick    # 4 KiB .. 4 MiB, fewer repeats

Prints bus bandwidth (NCCL's convention: all_reduce moves 2 (n-1)/n of the
buffer per rank, all_gather and reduce_scatter (n-1)/n of the whole) per
size, medians of repeats taken turn by turn (neuron, gloo, neuron, ...),
and the ratio; then the demo GPT's DDP training step on 2 ranks
(examples/ddp_train.py under torchrun) on neuron and on CPU with gloo.
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


def rank_main(rank, store, sizes, rounds, queue):
    import torchneuron  # noqa: F401

    dist.init_process_group("neuron", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    gloo = dist.new_group(backend="gloo")
    rows = []
    for nbytes in sizes:
        n = nbytes // 4
        res = {}
        for device, group in (("neuron", None), ("cpu", gloo)):
            x = torch.ones(n, device=device)
            out = torch.empty(n * WORLD, device=device)
            part = torch.empty(n // WORLD, device=device)
            res[device] = {
                "all_reduce": lambda x=x, g=group: dist.all_reduce(x, group=g),
                "all_gather": lambda x=x, o=out, g=group: dist.all_gather_into_tensor(o, x, group=g),
                "reduce_scatter": lambda x=x, p=part, g=group: dist.reduce_scatter_tensor(p, x, group=g),
            }
        reps = max(2, min(50, (1 << 24) // max(nbytes, 1)))
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            t = {"neuron": [], "cpu": []}
            for _ in range(rounds):  # turn by turn
                for device in ("neuron", "cpu"):
                    t[device].append(timed(res[device][op], device, reps))
            med = {d: statistics.median(v) for d, v in t.items()}
            moved = nbytes * (WORLD if op == "all_gather" else 1)
            factor = 2 * (WORLD - 1) / WORLD if op == "all_reduce" else (WORLD - 1) / WORLD
            bus = {d: moved * factor / med[d] / 1e9 for d in med}
            rows.append((op, nbytes, bus["neuron"], bus["cpu"]))
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def size_name(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def ddp_step(extra):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(WORLD),
           os.path.join(root, "examples", "ddp_train.py"), "--steps", "20"] + extra
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=root)
    m = re.search(r"([0-9,]+) tokens/s", out.stdout)
    if out.returncode or not m:
        raise RuntimeError(out.stdout + out.stderr)
    return float(m.group(1).replace(",", ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-ddp", action="store_true", help="skip the DDP training step")
    args = ap.parse_args()
    top = 22 if args.quick else 26
    sizes = [1 << k for k in range(12, top + 1, 2)]
    rounds = 3 if args.quick else 5
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        queue = mp.get_context("spawn").SimpleQueue()
        mp.spawn(rank_main, args=(os.path.join(d, "store"), sizes, rounds, queue), nprocs=WORLD)
        rows = queue.get()
    cpu = open("/proc/cpuinfo").read()
    model = re.search(r"model name\s*:\s*(.*)", cpu)
    print(f"host: {model.group(1) if model else '?'}, {os.cpu_count()} cores; {WORLD} ranks; medians of {rounds} "
          "rounds taken turn by turn")
    print("\n| collective | size | neuron GB/s | gloo CPU GB/s | neuron / gloo |\n|---|---:|---:|---:|---:|")
    for op, nbytes, bn, bc in rows:
        print(f"| {op} | {size_name(nbytes)} | {bn:.3f} | {bc:.3f} | {bn / bc:.2f} |")
    if not args.no_ddp:
        neuron = ddp_step([])
        cpu_tps = ddp_step(["--device", "cpu", "--backend", "gloo"])
        print(f"\nDDP training step, demo GPT, {WORLD} ranks: neuron {neuron:,.0f} tokens/s, gloo CPU "
              f"{cpu_tps:,.0f} tokens/s, ratio {neuron / cpu_tps:.2f}")


if __name__ == "__main__":
    main()
