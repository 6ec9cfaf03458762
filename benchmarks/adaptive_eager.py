"""Adaptive eager execution: fusion on, fusion off and PyTorch CPU eager, same run.

When a stream's worker takes a pointwise op and more pointwise ops are
already queued behind it, it runs the longest fusible run of them as one
group, tile by tile, and does not store the intermediates that Python freed
meanwhile (docs/adaptive_eager.md). This script measures what that buys on
code written as users write it:

- an 8-op float32 chain over 16M elements (`y = x * 1.5; y = y + 0.25; ...`,
  each intermediate dying as `y` is reassigned), and the same in bfloat16;
- a GELU (tanh approximation) written out in ops on (4096, 4096);
- an RMSNorm written out in ops on (8192, 1024) (the mean is a reduction, so
  only the pointwise ops around it can fuse);
- a training step of the GPT of examples/gpt.py (forward, backward, fused
  AdamW step), one optimizer step per call.

Method: the three sides (neuron with fusion on, neuron with fusion off,
CPU) take turns in blocks of a few calls (`timing.rotating_blocks`), so that
drifts of the host's memory bandwidth and of other processes' load reach
all three. Every neuron call ends with torch.neuron.synchronize(); before a
block switches the mode, the device is synchronised, so queued work never
runs under the other mode. Figures are medians per call. speedup = the other
side's time / the fused time: higher is better for fusion.

Before timing, each case runs with fusion on and off from the same state
(two paired calls, one with --quick; a stateless case is called again while
the worker happened to form no group), and the outputs (for the GPT step:
the loss, every gradient and every parameter after the step) are compared
bit for bit; after timing, once more (both GPT copies have then taken the
same steps). Any difference, or a fused group counted
while fusion is off, ends the script with exit status 1 and a description
of the difference. The adaptive_eager counters (torchneuron.metrics) over
the timed fused calls show that fusion happened: groups per call, ops per
group, elided intermediate stores per call.

    python benchmarks/adaptive_eager.py [--quick] [--markdown] [--threads N]
                                        [--samples N] [--case NAME ...]
"""

import argparse
import copy
import importlib
import os
import sys
import time
import warnings

import torch
import torchneuron

from timing import host_line, rotating_blocks

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from gpt import GPT, GPTConfig, batches, load_corpus  # noqa: E402

COUNTERS = ("adaptive_eager.groups", "adaptive_eager.fused_ops", "adaptive_eager.elided_writes")


class Mismatch(Exception):
    """Fusion on and off gave different results."""


# ------------------------------------------------------------------ setup

def _metrics():
    """torchneuron.metrics, or exit naming what is missing."""
    missing = [name for name in ("set_adaptive_eager", "adaptive_eager_enabled")
               if not hasattr(torchneuron, name)]
    metrics = getattr(torchneuron, "metrics", None)
    if metrics is None:
        try:
            metrics = importlib.import_module("torchneuron.metrics")
        except ImportError:
            missing.append("metrics")
    if missing:
        sys.exit("error: this torchneuron has no " + ", ".join("torchneuron." + m for m in missing)
                 + ": build it with adaptive eager execution first")
    return metrics


METRICS = None
_mode = None  # the adaptive eager setting this script last made


def set_mode(on: bool) -> None:
    """Fusion on or off. Switching synchronises first, so that work queued
    under one setting never runs under the other."""
    global _mode
    if _mode is on:
        return
    torch.neuron.synchronize()
    torchneuron.set_adaptive_eager(on)
    if torchneuron.adaptive_eager_enabled() != on:
        sys.exit(f"error: torchneuron.set_adaptive_eager({on}) left adaptive_eager_enabled() at "
                 f"{torchneuron.adaptive_eager_enabled()} (NEURON_LAUNCH_BLOCKING=1 turns fusion off)")
    _mode = on


def counters() -> dict:
    return {name: METRICS.get_counter_value(name) or 0 for name in COUNTERS}


# ------------------------------------------------------------------ cases
#
# A case: name, dtype label, shape label, and make(device) -> (fn, snapshot):
# fn() runs one call and returns what it computed (kept alive until after the
# synchronize, so that the final result is stored as a user's would be);
# snapshot(result) -> [(label, tensor)] to compare bit for bit. make() gives
# fresh state on each call: for the GPT step a fresh copy of the same model,
# so the k-th call of two makes computes the same thing.

def chain(x):
    """Eight pointwise ops, each result replacing the last."""
    y = x * 1.5
    y = y + 0.25
    y = torch.relu(y)
    y = y * y
    y = y - 0.5
    y = torch.sigmoid(y)
    y = y * 3
    y = y.clamp(0, 2)
    return y


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def rms_norm(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _out(result):
    return [("output", result)]


def tensor_case(name, work, shapes, dtype):
    """Stateless: work(*inputs) on inputs of `shapes`, randn from a seeded
    generator, made once per device."""
    g = torch.Generator().manual_seed(0)
    host = [torch.randn(*s, generator=g).to(dtype) for s in shapes]
    per_device = {}

    def make(device):
        if device not in per_device:
            per_device[device] = [t.to(device) for t in host]
        inputs = per_device[device]
        return (lambda: work(*inputs)), _out

    label = " ".join("x".join(map(str, s)) for s in shapes)
    return {"name": name, "dtype": str(dtype).replace("torch.", ""), "shape": label, "make": make,
            "stateful": False}


def gpt_case(layers, width, heads, block, batch):
    tok, data = load_corpus()
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=block, n_layer=layers, n_head=heads,
                    n_embd=width)
    torch.manual_seed(0)
    base = GPT(cfg)
    steps = batches(data, batch, block, 4, seed=1)

    def make(device):
        model = copy.deepcopy(base).to(device)
        opt = model.configure_optimizer(3e-4, fused=True)
        calls = [0]

        def step():
            x, y = steps[calls[0] % len(steps)]
            calls[0] += 1
            _, loss = model(x.to(device), y.to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.detach()

        def snapshot(loss):
            out = [("loss", loss)]
            for n, p in model.named_parameters():
                if p.grad is not None:
                    out.append((f"grad of {n}", p.grad))
            out += [(f"parameter {n}", p) for n, p in model.named_parameters()]
            return out

        return step, snapshot

    return {"name": "GPT train step", "dtype": "float32",
            "shape": f"{layers}L {width}w T={block} B={batch}", "make": make, "stateful": True}


def cases(quick: bool):
    if quick:
        n, gelu_shape, rms_shape, gpt = (1024, 1024), (1024, 1024), (2048, 512), (1, 64, 2, 32, 8)
    else:
        n, gelu_shape, rms_shape, gpt = (4096, 4096), (4096, 4096), (8192, 1024), (2, 128, 4, 64, 32)
    return [
        ("chain-f32", lambda: tensor_case("8-op chain", chain, [n], torch.float32)),
        ("chain-bf16", lambda: tensor_case("8-op chain", chain, [n], torch.bfloat16)),
        ("gelu", lambda: tensor_case("GELU-tanh, decomposed", gelu_tanh, [gelu_shape], torch.float32)),
        ("rmsnorm", lambda: tensor_case("RMSNorm, decomposed", rms_norm,
                                        [rms_shape, rms_shape[-1:]], torch.float32)),
        ("gpt", lambda: gpt_case(*gpt)),
    ]


# ------------------------------------------------------------------ checks

_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _host(snapshot):
    return [(label, t.detach().to("cpu").contiguous().clone()) for label, t in snapshot]


def _difference(fused, unfused, names=("fused", "unfused")):
    """None if the snapshots are bitwise equal, else a description of the
    first tensor that differs (the two sides called `names`)."""
    na, nb = names
    if [label for label, _ in fused] != [label for label, _ in unfused]:
        return "the results have different structure"
    for (label, a), (_, b) in zip(fused, unfused):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{label}: {na} {a.dtype} {tuple(a.shape)}, {nb} {b.dtype} {tuple(b.shape)}"
        bits = _INT_OF_SIZE[a.element_size()]
        ia, ib = a.reshape(-1).view(bits), b.reshape(-1).view(bits)
        if torch.equal(ia, ib):
            continue
        differ = (ia != ib).nonzero()
        if differ.numel():
            i = int(differ[0])
            fa, fb = a.reshape(-1)[i].item(), b.reshape(-1)[i].item()
            diff = (a.double() - b.double()).abs()
            worst = diff.nan_to_num(nan=float("inf")).max().item()
            return (f"{label} ({a.dtype}, shape {tuple(a.shape)}): {differ.numel()} of "
                    f"{a.numel()} elements differ; first at flat index {i}: {na} {fa!r} "
                    f"(bits {int(ia[i]) & (2 ** (8 * a.element_size()) - 1):#x}), {nb} {fb!r} "
                    f"(bits {int(ib[i]) & (2 ** (8 * a.element_size()) - 1):#x}); largest "
                    f"difference {worst:.3g}")
    return None


def neuron_call(fn, on: bool):
    def call():
        set_mode(on)
        out = fn()
        torch.neuron.synchronize()
        return out
    return call


def check(case, fused, unfused, calls: int, when: str):
    """Runs `calls` paired calls (unfused, then fused) and compares them bit
    for bit; raises Mismatch. Returns the counters summed over the fused
    calls and over the unfused ones."""
    (fn_on, snap_on), (fn_off, snap_off) = fused, unfused
    on_total = dict.fromkeys(COUNTERS, 0)
    off_total = dict.fromkeys(COUNTERS, 0)
    for k in range(calls):
        METRICS.clear_all()
        ref = _host(snap_off(neuron_call(fn_off, False)()))
        for name, v in counters().items():
            off_total[name] += v
        # A stateless case is called again (up to 3 more times) while the
        # worker happened to form no group: a check without one checks nothing.
        for attempt in range(1 if case["stateful"] else 4):
            METRICS.clear_all()
            out = _host(snap_on(neuron_call(fn_on, True)()))
            got = counters()
            for name, v in got.items():
                on_total[name] += v
            diff = _difference(out, ref)
            if diff:
                raise Mismatch(f"{when}, paired call {k + 1}: {diff}"
                               + _determinism_note(case, ref, fn_off))
            if got["adaptive_eager.groups"]:
                break
    return on_total, off_total


def _determinism_note(case, ref, fn_off):
    """Whether a second unfused run agrees with the first (if not, the
    difference is not fusion's doing). A stateful case replays a fresh copy
    for as many calls as the unfused side has made."""
    replay = fn_off.calls if case["stateful"] else 1
    try:
        fn, snap = case["make"]("neuron")
        out = None
        for _ in range(replay):
            out = neuron_call(fn, False)()
        again = _difference(_host(snap(out)), ref, ("rerun", "first unfused run"))
    except Exception as e:  # noqa: BLE001 -- a diagnostic only
        return f"\n  (rerunning unfused to check determinism failed: {e})"
    what = f"a fresh unfused copy replayed for {replay} calls" if case["stateful"] else "a second unfused run"
    if again is None:
        return f"\n  ({what} is identical to the first unfused run: fusion changed the result)"
    return (f"\n  ({what} differs from the first unfused run too, so the unfused path is not "
            f"deterministic here: {again})")


class Counted:
    """fn, counting its calls (the determinism replay needs the count)."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self):
        self.calls += 1
        return self.fn()


# ------------------------------------------------------------------ running

def run_case(case, samples: int, block: int, check_calls: int):
    fused = case["make"]("neuron")
    fn_off, snap_off = case["make"]("neuron")
    unfused = (Counted(fn_off), snap_off)
    fn_cpu, _ = case["make"]("cpu")

    torchneuron.clear_op_tracking()
    before_on, before_off = check(case, fused, unfused, check_calls, "before timing")
    fallbacks = sorted(torchneuron.get_fallback_ops())
    if before_off["adaptive_eager.groups"]:
        raise Mismatch(f"fusion off, yet {before_off['adaptive_eager.groups']} fused groups "
                       f"({before_off['adaptive_eager.fused_ops']} ops) were counted")

    on, off = neuron_call(fused[0], True), neuron_call(unfused[0], False)
    METRICS.clear_all()
    (t_on, _), (t_off, _), (t_cpu, _) = rotating_blocks(
        [(on, True), (off, True), (fn_cpu, False)], samples=samples, block=block)
    torch.neuron.synchronize()
    timed = counters()
    fused_calls = samples * (block + 1)  # rotating_blocks: one untimed call per block

    # Both sides made the same number of calls, so stateful cases (the GPT
    # step) must still agree.
    check(case, fused, unfused, 1, "after timing")
    return {"t_cpu": t_cpu, "t_on": t_on, "t_off": t_off,
            "per_call": {k: v / fused_calls for k, v in timed.items()},
            "check": before_on, "check_calls": check_calls, "fallbacks": fallbacks}


def fmt_row(case, r):
    pc = r["per_call"]
    groups, ops, elided = (pc[k] for k in COUNTERS)
    per_group = ops / groups if groups else 0.0
    notes = []
    if not groups:
        notes.append("no fused group in the timed calls")
    if not r["check"]["adaptive_eager.groups"]:
        notes.append("the bitwise check ran no fused group")
    if r["fallbacks"]:
        notes.append("fallback: " + ", ".join(f.replace("aten::", "") for f in r["fallbacks"]))
    return (case["name"], case["dtype"], case["shape"], r["t_cpu"] * 1e3, r["t_on"] * 1e3,
            r["t_off"] * 1e3, r["t_off"] / r["t_on"], r["t_cpu"] / r["t_on"], groups, per_group,
            elided, "; ".join(notes))


def print_text(rows, failures, header):
    print(header)
    print("speedup = the other side's median time / fusion on's (higher is better); counters are "
          "averages over the timed fused calls\n")
    print(f"{'case':<22}{'dtype':<10}{'shape':<22}{'CPU ms':>9}{'fused ms':>10}{'unfused ms':>11}"
          f"{'on/off':>8}{'on/CPU':>8}{'groups/call':>12}{'ops/group':>10}{'elided/call':>12}  note")
    for name, dt, shape, tc, tn, tf, s_off, s_cpu, g, pg, el, note in rows:
        print(f"{name:<22}{dt:<10}{shape:<22}{tc:>9.2f}{tn:>10.2f}{tf:>11.2f}{s_off:>7.2f}x"
              f"{s_cpu:>7.2f}x{g:>12.2f}{pg:>10.2f}{el:>12.2f}  {note}")
    _print_failures(failures)


def print_markdown(rows, failures, header):
    print(header + ".\n")
    print("| case | dtype | shape | CPU ms | fused ms | unfused ms | speedup on/off | speedup on/CPU "
          "| groups/call | ops/group | elided writes/call | note |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, dt, shape, tc, tn, tf, s_off, s_cpu, g, pg, el, note in rows:
        print(f"| {name} | {dt} | {shape} | {tc:.2f} | {tn:.2f} | {tf:.2f} | {s_off:.2f}x "
              f"| {s_cpu:.2f}x | {g:.2f} | {pg:.2f} | {el:.2f} | {note} |")
    _print_failures(failures)


def _print_failures(failures):
    if failures:
        print(f"\nFAILED: fusion on and off disagree in {len(failures)} case(s):")
        for name, message in failures:
            print(f"- {name}: {message}")
    else:
        print("\nFusion on and off gave bitwise identical results in every case "
              "(checked before and after timing).")


def main():
    global METRICS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few samples (a smoke run)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads for the CPU side (default: PyTorch's choice)")
    parser.add_argument("--samples", type=int, default=None, help="blocks per side (default 9, quick 3)")
    parser.add_argument("--case", action="append", default=None,
                        help="run only this case (repeatable): chain-f32 chain-bf16 gelu rmsnorm gpt")
    args = parser.parse_args()

    if os.environ.get("NEURON_LAUNCH_BLOCKING") == "1":
        sys.exit("error: NEURON_LAUNCH_BLOCKING=1 turns adaptive eager execution off; unset it")
    METRICS = _metrics()
    if args.threads:
        torch.set_num_threads(args.threads)
    torchneuron.set_fallback_mode("silent")  # shown in the note column instead
    warnings.simplefilter("ignore")

    header = host_line()
    print(header, file=sys.stderr, flush=True)
    samples = args.samples or (3 if args.quick else 9)
    block = 1 if args.quick else 2
    check_calls = 1 if args.quick else 2

    all_cases = cases(args.quick)
    known = [key for key, _ in all_cases]
    for key in args.case or ():
        if key not in known:
            parser.error(f"unknown case {key!r}; one of {', '.join(known)}")

    rows, failures = [], []
    for key, build in all_cases:
        if args.case and key not in args.case:
            continue
        case = build()
        start = time.perf_counter()
        try:
            r = run_case(case, samples, block, check_calls)
        except Mismatch as e:
            failures.append((f"{case['name']} {case['dtype']} {case['shape']} (--case {key})", str(e)))
            print(f"  {key}: MISMATCH: {e}", file=sys.stderr, flush=True)
        else:
            rows.append(fmt_row(case, r))
            print(f"  {key}: cpu {r['t_cpu'] * 1e3:.2f} ms, fused {r['t_on'] * 1e3:.2f} ms, unfused "
                  f"{r['t_off'] * 1e3:.2f} ms ({time.perf_counter() - start:.1f} s)",
                  file=sys.stderr, flush=True)
        del case
        torch.neuron.synchronize()
        torch.neuron.empty_cache()

    samples_note = f"medians of {samples} blocks of {block} calls per side, the sides taking turns"
    (print_markdown if args.markdown else print_text)(rows, failures, f"{header}; {samples_note}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
