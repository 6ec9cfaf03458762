"""Training-step throughput on neuron against PyTorch CPU eager, same run.

Models: the GPT of examples/gpt.py (the demo's size, and a wider one) and a
small CIFAR-shaped CNN (conv, batch norm, ReLU, max pooling, linear). Each
case builds one model, copies its weights to the neuron device, and times
whole training steps (forward, backward, optimizer step; fused AdamW for the
GPT, SGD with momentum for the CNN) on both, in float32 and under bfloat16
autocast. A step's time is taken with the device synchronised; the table
shows medians after warm-up, the ratio neuron / CPU throughput (higher is
better for neuron), peak device memory and how many ops fell back.

    python benchmarks/train.py                 # full table
    python benchmarks/train.py --quick         # fewer steps, demo-size GPT only
    python benchmarks/train.py --profile gpt   # per-op times on neuron vs CPU

--profile runs with NEURON_LAUNCH_BLOCKING=1 so that each op's host time
under torch.profiler includes its kernel (otherwise a launch only queues).
"""

import argparse
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--steps", type=int, default=12, help="timed steps per case (after warm-up)")
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--quick", action="store_true")
ap.add_argument("--cpu-threads", type=int, default=None,
                help="torch.set_num_threads for the CPU runs (default: PyTorch's choice)")
ap.add_argument("--profile", choices=["gpt", "gpt-wide", "cnn"], default=None,
                help="per-op time table for one case instead of the throughput table")
ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                help="for --profile")
ap.add_argument("--cpu-time", action="store_true",
                help="time steps by the process's CPU seconds (every thread) instead of wall time: on a "
                     "loaded host, time spent waiting for a core does not count (use with one thread a side)")
args = ap.parse_args()
if args.profile:
    os.environ["NEURON_LAUNCH_BLOCKING"] = "1"  # read when the runtime starts

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torchneuron  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from gpt import GPT, GPTConfig, batches, load_corpus  # noqa: E402


class CNN(nn.Module):
    """CIFAR-shaped: 3x32x32 -> 32 -> 64 -> 128 channels, 10 classes."""

    def __init__(self, classes=10):
        super().__init__()
        layers, c_in = [], 3
        for c in (32, 64, 128):
            layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                       nn.MaxPool2d(2)]
            c_in = c
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(128 * 4 * 4, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def gpt_case(width: int, layers: int, heads: int, block: int, batch: int):
    tok, data = load_corpus()
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=block, n_layer=layers, n_head=heads,
                    n_embd=width)
    torch.manual_seed(0)
    model = GPT(cfg)
    steps = batches(data, batch, block, 4, seed=1)

    def step_fn(m, device, opt, i):
        x, y = steps[i % len(steps)]
        _, loss = m(x.to(device), y.to(device))
        return loss

    name = f"GPT {layers}L {width}w T={block} B={batch}"
    make_opt = lambda m: m.configure_optimizer(3e-4, fused=True)  # noqa: E731
    return name, model, make_opt, step_fn, batch * block, "tokens/s"


def cnn_case(batch: int):
    torch.manual_seed(0)
    model = CNN()
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(batch, 3, 32, 32, generator=g), torch.randint(10, (batch,), generator=g))
            for _ in range(4)]

    def step_fn(m, device, opt, i):
        x, y = data[i % len(data)]
        return F.cross_entropy(m(x.to(device)), y.to(device))

    make_opt = lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)  # noqa: E731
    return f"CNN 32-64-128 32x32 B={batch}", model, make_opt, step_fn, batch, "samples/s"


def sync(device):
    if device == "neuron":
        torch.neuron.synchronize()


def run_steps(model, device, make_opt, step_fn, dtype, n, warmup):
    """Median seconds per training step over n steps after warm-up."""
    opt = make_opt(model)
    clock = time.process_time if args.cpu_time else time.perf_counter
    times = []
    for i in range(warmup + n):
        start = clock()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
            loss = step_fn(model, device, opt, i)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync(device)
        if i >= warmup:
            times.append(clock() - start)
    return statistics.median(times)


def fresh(model, device):
    import copy
    twin = copy.deepcopy(model)
    twin.load_state_dict(model.state_dict())
    return twin.to(device)


def cases():
    out = [gpt_case(128, 2, 4, 64, 32)]  # the demo's model
    if not args.quick:
        out.append(gpt_case(256, 4, 8, 128, 16))
        out.append(cnn_case(64))
    return out


def throughput_table():
    n = 6 if args.quick else args.steps
    rows = []
    for name, model, make_opt, step_fn, per_step, unit in cases():
        for dtype in ("float32", "bfloat16"):
            torchneuron.clear_op_tracking()
            torch.neuron.reset_peak_memory_stats()
            t_neuron = run_steps(fresh(model, "neuron"), "neuron", make_opt, step_fn, dtype, n, args.warmup)
            peak = torch.neuron.max_memory_allocated() / 2**20
            fallbacks = sum(torchneuron.get_fallback_ops().values())
            t_cpu = run_steps(fresh(model, "cpu"), "cpu", make_opt, step_fn, dtype, n, args.warmup)
            rows.append((name, dtype, per_step / t_neuron, per_step / t_cpu, unit, peak, fallbacks,
                         t_neuron, t_cpu))
            print(f"  {name} {dtype}: neuron {t_neuron * 1e3:.1f} ms/step, cpu {t_cpu * 1e3:.1f} ms/step",
                  file=sys.stderr, flush=True)
    print(f"\nCPU threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}; "
          f"medians of {n} steps after {args.warmup} warm-up steps"
          f"{' (process CPU time)' if args.cpu_time else ''}\n")
    if os.getloadavg()[0] > (os.cpu_count() or 1) and torch.get_num_threads() > 1:
        print("note: the load is above the core count, where PyTorch's OpenMP threads wait on each\n"
              "other's descheduled peers (CPU steps 5-15x slower than with one thread); compare with\n"
              "--cpu-threads 1 and TORCHNEURON_NUM_THREADS=1 as well\n")
    print("| model | dtype | neuron | CPU eager | neuron / CPU | ms/step neuron / CPU | peak device MiB | fallback calls |")
    print("|---|---|---|---|---|---|---|---|")
    for name, dtype, tn, tc, unit, peak, fb, sn, sc in rows:
        print(f"| {name} | {dtype} | {tn:,.0f} {unit} | {tc:,.0f} {unit} | {tn / tc:.2f}x | "
              f"{sn * 1e3:.1f} / {sc * 1e3:.1f} | {peak:.1f} | {fb} |")


# The same work under each device's op names.
CANONICAL = {
    "aten::_scaled_dot_product_fused_attention_overrideable": "SDPA forward",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "SDPA forward",
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": "SDPA backward",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": "SDPA backward",
    "aten::convolution_overrideable": "convolution forward",
    "aten::mkldnn_convolution": "convolution forward",
    "aten::convolution_backward_overrideable": "convolution backward",
    "aten::convolution_backward": "convolution backward",  # CPU's kernel; a wrapper on neuron
}


def profile_table():
    """Self time per ATen op over a few steps on each device, largest on
    neuron first (host times; with launch blocking they include kernels)."""
    from torch.profiler import ProfilerActivity, profile

    pick = {"gpt": lambda: gpt_case(128, 2, 4, 64, 32), "gpt-wide": lambda: gpt_case(256, 4, 8, 128, 16),
            "cnn": lambda: cnn_case(64)}[args.profile]
    name, model, make_opt, step_fn, _, _ = pick()
    per_op = {}
    shapes = {}
    for device in ("neuron", "cpu"):
        m = fresh(model, device)
        run_steps(m, device, make_opt, step_fn, args.dtype, 1, 1)  # warm-up
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            run_steps(m, device, make_opt, step_fn, args.dtype, 3, 0)
        for ev in prof.key_averages(group_by_input_shape=True):
            if not ev.key.startswith("aten::") and ev.key not in CANONICAL:
                continue
            key = CANONICAL.get(ev.key, ev.key)
            per_op.setdefault(key, {"neuron": 0.0, "cpu": 0.0})
            per_op[key][device] += ev.self_cpu_time_total / 3 / 1e3  # ms per step
            if device == "neuron":
                prev = shapes.get(key)
                if prev is None or ev.self_cpu_time_total > prev[0]:
                    shapes[key] = (ev.self_cpu_time_total, str(ev.input_shapes)[:70])
    total_n = sum(v["neuron"] for v in per_op.values())
    total_c = sum(v["cpu"] for v in per_op.values())
    print(f"\n{name}, {args.dtype}: ATen self time per step, neuron {total_n:.1f} ms, CPU {total_c:.1f} ms"
          f" (load average {os.getloadavg()[0]:.1f})\n")
    print("| op | neuron ms | CPU ms | neuron / CPU time | largest neuron shapes |")
    print("|---|---|---|---|---|")
    for key, v in sorted(per_op.items(), key=lambda kv: -kv[1]["neuron"])[:25]:
        ratio = v["neuron"] / v["cpu"] if v["cpu"] > 0 else float("inf")
        print(f"| {key} | {v['neuron']:.2f} | {v['cpu']:.2f} | {ratio:.2f} | {shapes.get(key, (0, ''))[1]} |")


def main():
    torchneuron.set_fallback_mode("silent")  # counted in the table instead
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    if args.profile:
        profile_table()
    else:
        throughput_table()


if __name__ == "__main__":
    main()
