"""Where the demo GPT's DDP step on 2 ranks of this host spends its time:
each rank's step alone (no collective: what compute costs with both ranks
on the machine), the DDP step, and their difference (what DDP costs), on
neuron (the "neuron" backend) and on the CPU (gloo), turn by turn in one
run. For neuron's DDP step it splits the collectives' time: the time the
segment's barriers waited for the later rank (the ranks' skew), and what
the same all-reduces cost back to back without compute in between (the
copies and reductions). The neuron DDP step runs twice: with the
group's collectives on its own stream (as NCCL's; they overlap the rest of
the backward), and on the caller's stream as before
(TORCHNEURON_DIST_OWN_STREAM=0, a second group). --profile prints rank 0's top ops of a neuron DDP
step (torch.profiler).

    python benchmarks/ddp_breakdown.py [--steps 10] [--rounds 3] [--profile]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from timing import cpu_model

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

WORLD = 2


def sync(device):
    if device == "neuron":
        torch.neuron.synchronize()


def steps_time(rank, device, ddp, steps, group):
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpt import GPT, GPTConfig, batches, load_corpus

    tok, corpus = load_corpus()
    cfg = GPTConfig(vocab_size=tok.vocab_size)
    torch.manual_seed(0)
    model = GPT(cfg).to(device)
    if ddp:
        model = DDP(model, process_group=group)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = list(batches(corpus, 16, cfg.block_size, steps + 2, seed=1 + rank))

    def step(x, y):
        _, loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    from torchneuron import _C

    for x, y in data[:2]:  # warm-up
        step(x, y).item()
    sync(device)
    dist.barrier(group=group)
    wait0, colls0 = _C._neuron_c10d_shm_barrier_wait()[0], _C._neuron_c10d_shm_collectives()
    start = time.perf_counter()
    for x, y in data[2:]:
        step(x, y)
    sync(device)
    elapsed = (time.perf_counter() - start) / steps
    extra = {"wait": (_C._neuron_c10d_shm_barrier_wait()[0] - wait0) / 1e9 / steps,
             "collectives": (_C._neuron_c10d_shm_collectives() - colls0) / steps}
    dist.barrier(group=group)
    return elapsed, (model, step, data, extra)


def bare_all_reduces(model, device, reps=20):
    """The DDP step's gradient all-reduces (one tensor of all the gradients'
    size per bucket; here: the whole), back to back, seconds per round."""
    n = sum(p.numel() for p in model.parameters())
    x = torch.ones(n, device=device)
    dist.all_reduce(x)
    sync(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(reps):
        dist.all_reduce(x)
    sync(device)
    return (time.perf_counter() - start) / reps


def rank_main(rank, store, steps, rounds, profile, queue):
    import torchneuron  # noqa: F401

    dist.init_process_group("neuron", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    torch.neuron.set_device(0)
    gloo = dist.new_group(backend="gloo")
    os.environ["TORCHNEURON_DIST_OWN_STREAM"] = "0"
    on_caller = dist.new_group(backend="neuron")
    del os.environ["TORCHNEURON_DIST_OWN_STREAM"]
    groups = {"neuron": ("neuron", dist.group.WORLD), "neuron, caller's stream": ("neuron", on_caller),
              "cpu": ("cpu", gloo)}
    times = {(d, m): [] for d in groups for m in ("alone", "ddp")}
    times["wait"], times["collectives"], times["bare"] = [], [], []
    for _ in range(rounds):  # turn by turn
        for name, (device, group) in groups.items():
            for mode in ("alone", "ddp"):
                if mode == "alone" and name != device:
                    continue  # the same as neuron's
                t, (model, _, _, extra) = steps_time(rank, device, mode == "ddp", steps, group)
                times[name, mode].append(t)
                if name == "neuron" and mode == "ddp":
                    times["wait"].append(extra["wait"])
                    times["collectives"].append(extra["collectives"])
                    times["bare"].append(bare_all_reduces(model, device))
    if profile:
        _, (model, step, data, _) = steps_time(rank, "neuron", True, 2, groups["neuron"])
        from torch.profiler import ProfilerActivity, profile as prof

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.PrivateUse1]
                                         if hasattr(ProfilerActivity, "PrivateUse1") else [])
        with prof(activities=acts) as p:
            for x, y in data[:3]:
                step(x, y)
            torch.neuron.synchronize()
        if rank == 0:
            print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=25), flush=True)
    if rank == 0:
        queue.put({k: statistics.median(v) for k, v in times.items() if v})
    dist.barrier(group=gloo)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        queue = mp.get_context("spawn").SimpleQueue()
        mp.spawn(rank_main, args=(os.path.join(d, "store"), args.steps, args.rounds, args.profile, queue),
                 nprocs=WORLD)
        med = queue.get()
    print(f"host: {cpu_model()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"{WORLD} ranks; ms per step, medians of {args.rounds} rounds of {args.steps} steps, turn by turn")
    print("\n| device | alone | DDP | DDP - alone |\n|---|---:|---:|---:|")
    for name in ("neuron", "neuron, caller's stream", "cpu"):
        a, b = med[name.split(",")[0], "alone"] * 1e3, med[name, "ddp"] * 1e3
        print(f"| {name} | {a:.1f} | {b:.1f} | {b - a:.1f} |")
    print(f"\nneuron DDP, per step: {med['collectives']:.1f} collectives through the segment; their barriers "
          f"waited {med['wait'] * 1e3:.1f} ms for the later rank; an all_reduce of every gradient at once, "
          f"back to back: {med['bare'] * 1e3:.2f} ms")
    print(f"\nneuron / CPU step time: alone {med['neuron', 'alone'] / med['cpu', 'alone']:.2f}, "
          f"DDP {med['neuron', 'ddp'] / med['cpu', 'ddp']:.2f}")


if __name__ == "__main__":
    main()
