"""Per-kernel device time of a GPT training step: neuron compiled against neuron eager.

torch.profiler (CPU and PrivateUse1) over --steps steps per side, the sides
taking --rounds turns; the neuron records (torchneuron.profiler.records) of
the device's leaf work (kernels, copies, fused members, program steps) are
summed per name and divided by the steps. Names that differ between the
sides (a compiled program's step names its node; a GEMM with an epilogue
names it) are listed as they come, largest first.

Then each side's time by class (GEMMs with their epilogues, attention,
the optimizer, the rest) and the ceiling of graph-level work: compiled /
eager if every compiled step outside the GEMMs, attention and the optimizer
took no time (those kernels are the same code on both sides). Shares and
ratios hold under load better than the milliseconds do; TORCHNEURON_NUM_THREADS=1
takes the pool's split out of them.

    python benchmarks/compile_kernels.py [--gpt wide|demo] [--rounds 3] [--steps 2] [--top 40]
"""

import argparse
import collections
import copy
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import torchneuron  # noqa: F401
from torchneuron import profiler as tnprof
from torchneuron.compiler import wait_for_kernels

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from gpt import GPT, GPTConfig, batches, load_corpus  # noqa: E402

SIZES = {"demo": (2, 128, 4, 64, 32), "wide": (4, 256, 8, 128, 16)}
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--gpt", choices=list(SIZES), default="wide")
ap.add_argument("--rounds", type=int, default=3, help="profiled turns per side")
ap.add_argument("--steps", type=int, default=2, help="steps per turn")
ap.add_argument("--top", type=int, default=40, help="rows to print")
args = ap.parse_args()

layers, width, heads, seq, batch = SIZES[args.gpt]
tok, corpus = load_corpus()
torch.manual_seed(0)
base = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=seq, n_layer=layers, n_head=heads, n_embd=width))
data = batches(corpus, batch, seq, 4, seed=1)
LEAVES = ("kernel", "copy", "fused member", "program step", "NKI kernel", "host task")


class Side:
    def __init__(self, backend):
        self.model = copy.deepcopy(base).to("neuron")
        self.opt = self.model.configure_optimizer(3e-4, fused=True)
        self.fwd = torch.compile(self.model, backend=backend) if backend else self.model
        self.i = 0
        self.us = collections.Counter()
        self.calls = collections.Counter()
        self.steps = 0

    def step(self):
        x, y = data[self.i % len(data)]
        self.i += 1
        _, loss = self.fwd(x.to("neuron"), y.to("neuron"))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def turn(self, record=True):
        if not record:
            for _ in range(args.steps):
                self.step()
            torch.neuron.synchronize()
            return
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            for _ in range(args.steps):
                self.step()
            torch.neuron.synchronize()
        for r in tnprof.records():
            if r["kind"] in LEAVES:
                key = f"{r['kind']}: {r['name']}"
                self.us[key] += r["device_us"]
                self.calls[key] += 1
        self.steps += args.steps


sides = {"compiled": Side("neuron"), "eager": Side(None)}
for s in sides.values():
    s.turn(record=False)
    s.turn(record=False)
wait_for_kernels()
for _ in range(args.rounds):
    for s in sides.values():
        s.turn()

print(f"GPT {args.gpt}, load average {os.getloadavg()[0]:.1f}; device us per step, "
      f"{args.rounds * args.steps} profiled steps per side")
for name, s in sides.items():
    total = sum(s.us.values()) / s.steps
    print(f"\n== {name}: {total / 1e3:.2f} ms of leaf device time per step")
    for key, us in s.us.most_common(args.top):
        print(f"{us / s.steps / 1e3:9.3f} ms {s.calls[key] / s.steps:6.1f}x  {key}")


def kernel_class(key):
    """The class of a leaf record's key ("kind: name")."""
    name = key.split(": ", 1)[1]
    if name == "gemm" or name.startswith("gemm epilogue"):
        return "GEMM (with epilogues)"
    if name.startswith("sdpa"):
        return "attention"
    if name == "fused_adam":
        return "optimizer"
    return "rest"


CLASSES = ("GEMM (with epilogues)", "attention", "optimizer", "rest")
per_class = {}
for name, s in sides.items():
    c = collections.Counter()
    for key, us in s.us.items():
        c[kernel_class(key)] += us / s.steps / 1e3
    per_class[name] = c
print("\n| class | compiled ms | share | eager ms | share |\n|---|---:|---:|---:|---:|")
totals = {name: sum(c.values()) for name, c in per_class.items()}
for cls in CLASSES:
    a, b = per_class["compiled"][cls], per_class["eager"][cls]
    print(f"| {cls} | {a:.2f} | {a / totals['compiled']:.1%} | {b:.2f} | {b / totals['eager']:.1%} |")
floor = totals["compiled"] - per_class["compiled"]["rest"]
print(f"\ncompiled / eager speedup now {totals['eager'] / totals['compiled']:.3f}x; "
      f"at most {totals['eager'] / floor:.3f}x if the compiled rest took no time")
