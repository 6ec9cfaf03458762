"""Where a demo GPT training step's time goes: neuron compiled against neuron eager.

The sides take turns (blocks of --steps steps). Per step, medians:
- host: wall time of the calling thread issuing the forward (of which
  inside CompiledGraph.__call__, the runner), the backward (of which the
  runner) and the fused AdamW step, then the wait in synchronize;
- CPU time of each thread of the process (/proc/self/task/*/schedstat), summed
  over the blocks and divided by the steps: the calling thread, the
  busiest thread (the stream's worker, which runs the program and the
  kernels' first share) and the others (the kernel pool). On a loaded host
  wall times stretch while CPU times stay close to the work done; CPU /
  (wall x usable cores) is the share of the cores the step kept busy.

    python benchmarks/compile_breakdown.py [--rounds 6] [--steps 2]
"""

import argparse
import copy
import os
import statistics
import sys
import time

import torch

import torchneuron  # noqa: F401
from torchneuron.compiler import runner as _runner
from torchneuron.compiler import wait_for_kernels

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from gpt import GPT, GPTConfig, batches, load_corpus  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--rounds", type=int, default=6, help="turns per side")
ap.add_argument("--steps", type=int, default=2, help="steps per turn")
args = ap.parse_args()

def thread_cpu():
    """{thread id: CPU seconds} of this process's threads (schedstat's run
    time, in nanoseconds: stat's utime and stime count 10 ms ticks)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0]) / 1e9
        except OSError:
            pass
    return out


runner_seconds = [0.0]
_call = _runner.CompiledGraph.__call__


def timed_call(self, *a):
    start = time.perf_counter()
    try:
        return _call(self, *a)
    finally:
        runner_seconds[0] += time.perf_counter() - start


_runner.CompiledGraph.__call__ = timed_call

tok, corpus = load_corpus()
torch.manual_seed(0)
base = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=64, n_layer=2, n_head=4, n_embd=128))
data = batches(corpus, 32, 64, 4, seed=1)


class Side:
    def __init__(self, backend):
        self.model = copy.deepcopy(base).to("neuron")
        self.opt = self.model.configure_optimizer(3e-4, fused=True)
        self.fwd = torch.compile(self.model, backend=backend) if backend else self.model
        self.i, self.rows, self.cpu = 0, [], {}

    def step(self, record):
        x, y = data[self.i % len(data)]
        self.i += 1
        runner_seconds[0] = 0.0
        t0 = time.perf_counter()
        _, loss = self.fwd(x.to("neuron"), y.to("neuron"))
        t1, r1 = time.perf_counter(), runner_seconds[0]
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        self.opt.step()
        t3 = time.perf_counter()
        torch.neuron.synchronize()
        t4 = time.perf_counter()
        if record:
            self.rows.append({"forward": t1 - t0, "  runner": r1, "backward": t2 - t1,
                              "  runner ": runner_seconds[0] - r1, "AdamW": t3 - t2, "synchronize": t4 - t3,
                              "step (wall)": t4 - t0})

    def turn(self, record=True):
        before = thread_cpu()
        for _ in range(args.steps):
            self.step(record)
        after = thread_cpu()
        if record:
            for tid, v in after.items():
                self.cpu[tid] = self.cpu.get(tid, 0.0) + v - before.get(tid, 0.0)


sides = {"compiled": Side("neuron"), "eager": Side(None)}
for s in sides.values():
    for _ in range(2):
        s.turn(record=False)
wait_for_kernels()
for _ in range(args.rounds):
    for s in sides.values():
        s.turn()

main = __import__("threading").get_native_id()
cores = len(os.sched_getaffinity(0))
print(f"load average {os.getloadavg()[0]:.1f}, {cores} usable cores; ms per step, medians of "
      f"{args.rounds * args.steps} steps")
names = list(sides["compiled"].rows[0])
print(f"{'':22s}" + "".join(f"{k:>10s}" for k in sides))
for n in names:
    print(f"{n:22s}" + "".join(f"{statistics.median(r[n] for r in s.rows) * 1e3:10.2f}" for s in sides.values()))
print("CPU per step (all turns)")
lines = {"calling thread": [], "busiest other thread": [], "other threads": [], "process": [],
         "CPU / (wall x cores)": []}
for s in sides.values():
    steps = len(s.rows)
    others = sorted((v for t, v in s.cpu.items() if t != main), reverse=True)
    lines["calling thread"].append(s.cpu.get(main, 0.0) / steps * 1e3)
    lines["busiest other thread"].append((others[0] if others else 0.0) / steps * 1e3)
    lines["other threads"].append(sum(others[1:]) / steps * 1e3)
    total = sum(s.cpu.values())
    lines["process"].append(total / steps * 1e3)
    wall = sum(r["step (wall)"] for r in s.rows)
    lines["CPU / (wall x cores)"].append(total / (wall * cores))
for n, v in lines.items():
    print(f"{n:22s}" + "".join(f"{x:10.2f}" for x in v))
