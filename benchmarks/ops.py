"""Native eager ops on neuron versus PyTorch CPU, measured in the same run.

Part 1, small-tensor latency: the host cost per call of tiny ops (64
elements), timed over a loop of calls that ends with a synchronize, so the
cost of waiting for queued work is paid and amortised; neuron and CPU loops
take turns, so that the host slowing down for a while reaches both.
neuron/cpu: lower is better (target <= 1.5x). The calling thread's CPU
time per call is shown too ("host cpu"): it is what the Python thread pays
per op, and unlike wall time it hardly changes when other processes load
the machine (wall time then also counts the stream worker waiting for a
core).

Part 2, large-tensor throughput: 16M elements (4096 x 4096) in float32 and
bfloat16. The three sides (neuron, cpu as called, cpu with out=) take turns
in blocks of a few back-to-back calls (a neuron block ends with a
synchronize), so that drifts of the host's memory bandwidth, which move a
memory-bound op by 10-20% over seconds, reach all three. speedup = cpu time /
neuron time: higher is better (target >= 1.0x for elementwise ops and
reductions). Memory-bound ops also show the bandwidth they reach (bytes
read + written per second) against a memcpy measured now (torch CPU copy_ of
the same size, read + write).

An op without a native kernel still runs (through the CPU fallback) and is
marked "fallback" with the ATen ops that fell back. Figures are medians.

    python benchmarks/ops.py [--quick] [--markdown] [--threads 2]
"""

import argparse
import ctypes
import os
import time
import warnings

import torch
import torch.nn.functional as F
import torchneuron

from timing import median_time, rotating_blocks

MIB = 2**20


def _sync(device):
    if device == "neuron":
        torch.neuron.synchronize()


def median_seconds(fn, device, repeats: int, inner: int = 1, budget: float = 0.5,
                   clock=time.perf_counter) -> float:
    """Median per call over at least `repeats` trials of `inner` calls and a
    synchronize, more trials for cheap ops (up to 50, within about `budget`
    seconds): medians of a few trials are noisy on a shared machine. With
    clock=time.thread_time: the calling thread's CPU time."""
    start = time.perf_counter()
    fn()
    _sync(device)  # warm up: allocator caches, worker threads
    once = (time.perf_counter() - start) * inner
    repeats = max(repeats, min(50, int(budget / max(once, 1e-9))))

    def trial():
        for _ in range(inner):
            fn()
        _sync(device)

    return median_time(trial, repeats, warmup=False, clock=clock) / inner


def fallbacks_of(fn) -> list:
    torchneuron.clear_op_tracking()
    fn()
    torch.neuron.synchronize()
    return sorted(torchneuron.get_fallback_ops())


def _note(fallbacks) -> str:
    if not fallbacks:
        return ""
    return "fallback: " + ", ".join(f.replace("aten::", "") for f in fallbacks)


# ------------------------------------------------------------------ small ops

def small_cases(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, generator=g).to(device)
    y = torch.randn(64, generator=g).to(device)
    idx = torch.randint(0, 64, (16,), generator=g).to(device)
    return {
        "add": lambda: torch.add(x, y),
        "mul": lambda: torch.mul(x, y),
        "relu": lambda: torch.relu(x),
        "sum": lambda: torch.sum(x),
        "index_select": lambda: torch.index_select(x, 0, idx),
    }


SMALL_SAMPLES = 25  # loops per side, the sides taking turns


def small_ops(iters: int, repeats: int):
    rows = []
    neuron, cpu = small_cases("neuron"), small_cases("cpu")
    for name in neuron:
        fb = fallbacks_of(neuron[name])
        n_iters = max(iters // 10, 10) if fb else iters
        (t_n, _), (t_c, _) = rotating_blocks([(neuron[name], True), (cpu[name], False)],
                                             samples=SMALL_SAMPLES, block=n_iters, settle=0)
        h_n = median_seconds(neuron[name], "neuron", repeats, n_iters, clock=time.thread_time)
        h_c = median_seconds(cpu[name], "cpu", repeats, iters, clock=time.thread_time)
        rows.append((name, t_n * 1e6, t_c * 1e6, t_n / t_c, h_n * 1e6, h_c * 1e6, h_n / h_c,
                     _note(fb)))
    return rows


# ------------------------------------------------------------------ large ops

def large_cases(device, dtype, n: int):
    side = int(round(n ** 0.5))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(side, side, generator=g).to(dtype).to(device)
    y = torch.randn(side, side, generator=g).to(dtype).to(device)
    half = torch.randn(side // 2, side, generator=g).to(dtype).to(device)
    rows = torch.randint(0, side, (side,), generator=g).to(device)
    e = x.element_size()
    nb = x.numel() * e
    # name -> (fn, fn writing into out=, bytes moved or None if compute-bound)
    return {
        "add": (lambda: torch.add(x, y), lambda o: torch.add(x, y, out=o), 3 * nb),
        "mul": (lambda: torch.mul(x, y), lambda o: torch.mul(x, y, out=o), 3 * nb),
        "gelu": (lambda: F.gelu(x), lambda o: torch._C._nn.gelu(x, out=o), 2 * nb),
        "exp": (lambda: torch.exp(x), lambda o: torch.exp(x, out=o), 2 * nb),
        "sum": (lambda: torch.sum(x), lambda o: torch.sum(x, (0, 1), out=o), nb),
        "logsumexp(dim=-1)": (lambda: torch.logsumexp(x, -1),
                              lambda o: torch.logsumexp(x, -1, out=o), nb),
        "amax(dim=-1)": (lambda: torch.amax(x, -1), lambda o: torch.amax(x, -1, out=o), nb),
        "cat(dim=0)": (lambda: torch.cat([half, half]),
                       lambda o: torch.cat([half, half], out=o), 2 * nb),
        "index_select(dim=0)": (lambda: torch.index_select(x, 0, rows),
                                lambda o: torch.index_select(x, 0, rows, out=o),
                                2 * nb + rows.numel() * 8),
        "sort(dim=-1)": (lambda: torch.sort(x, -1), lambda o: torch.sort(x, -1, out=tuple(o)),
                         None),
    }


def memcpy_gbps(n: int, repeats: int) -> float:
    """The better of torch CPU copy_ (its threads) and one memmove, counting
    bytes read + written."""
    src = torch.randn(n)
    dst = torch.empty_like(src)
    nbytes = src.numel() * src.element_size()
    t_copy = median_seconds(lambda: dst.copy_(src), "cpu", repeats)
    d, s = dst.data_ptr(), src.data_ptr()
    t_memmove = median_seconds(lambda: ctypes.memmove(d, s, nbytes), "cpu", repeats)
    return 2 * nbytes / min(t_copy, t_memmove) / 1e9


def large_ops(n: int, repeats: int, dtypes, memcpy: float):
    rows = []
    for dtype in dtypes:
        neuron, cpu = large_cases("neuron", dtype, n), large_cases("cpu", dtype, n)
        for name, (fn_n, _, nbytes) in neuron.items():
            fn_c, fn_c_out = cpu[name][:2]
            fb = fallbacks_of(fn_n)
            slow = name.startswith("sort") or fb
            out = fn_c()
            (t_n, _), (t_c, _), (t_o, _) = rotating_blocks(
                [(fn_n, True), (fn_c, False), (lambda: fn_c_out(out), False)],
                samples=max(3, repeats // 2) if slow else 2 * repeats + 1, block=1 if slow else 3)
            gbps = nbytes / t_n / 1e9 if nbytes else None
            rows.append((name, str(dtype).replace("torch.", ""), t_n * 1e3, t_c * 1e3, t_c / t_n,
                         t_o * 1e3, t_o / t_n, gbps, gbps / memcpy * 100 if gbps else None,
                         _note(fb)))
        del neuron, cpu
        torch.neuron.empty_cache()
    return rows


# ------------------------------------------------------------------ output

def _machine() -> str:
    """Cores and load: other processes on the machine skew every figure."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} cores, load average {load:.1f} at the start"


def print_text(small, large, memcpy, n, threads, machine):
    print(f"PyTorch CPU threads: {threads}; memcpy ({n * 4 // MIB} MiB, read+write): "
          f"{memcpy:.1f} GB/s; {machine}")
    print("\nSmall-tensor latency, 64 elements, per call incl. amortised synchronize "
          "(neuron/cpu: lower is better)")
    print(f"{'op':<14}{'neuron us':>11}{'cpu us':>9}{'neuron/cpu':>12}"
          f"{'host cpu: neuron us':>21}{'cpu us':>8}{'neuron/cpu':>12}  note")
    for name, tn, tc, r, hn, hc, hr, note in small:
        print(f"{name:<14}{tn:>11.2f}{tc:>9.2f}{r:>11.2f}x{hn:>21.2f}{hc:>8.2f}{hr:>11.2f}x  {note}")
    print(f"\nLarge tensors, {n / MIB:.0f}M elements (speedup = cpu/neuron: higher is better; "
          "cpu out= reuses a preallocated output)")
    print(f"{'op':<21}{'dtype':<10}{'neuron ms':>10}{'cpu ms':>9}{'speedup':>9}"
          f"{'cpu out= ms':>12}{'speedup':>9}{'GB/s':>8}{'%memcpy':>9}  note")
    for name, dt, tn, tc, s, to, so, gbps, pct, note in large:
        g = f"{gbps:8.1f}" if gbps else f"{'-':>8}"
        p = f"{pct:8.0f}%" if pct else f"{'-':>9}"
        print(f"{name:<21}{dt:<10}{tn:>10.2f}{tc:>9.2f}{s:>8.2f}x{to:>12.2f}{so:>8.2f}x{g}{p}"
              f"  {note}")


def print_markdown(small, large, memcpy, n, threads, machine):
    print(f"PyTorch CPU threads: {threads}; memcpy bandwidth ({n * 4 // MIB} MiB, read+write): "
          f"{memcpy:.1f} GB/s; {machine}.\n")
    print("| small op (64 el.) | neuron us | cpu us | neuron/cpu | host cpu: neuron us | cpu us "
          "| neuron/cpu | note |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, tn, tc, r, hn, hc, hr, note in small:
        print(f"| {name} | {tn:.2f} | {tc:.2f} | {r:.2f}x | {hn:.2f} | {hc:.2f} | {hr:.2f}x | {note} |")
    print(f"\n| large op ({n / MIB:.0f}M el.) | dtype | neuron ms | cpu ms | speedup "
          "| cpu out= ms | speedup vs out= | GB/s | % memcpy | note |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, dt, tn, tc, s, to, so, gbps, pct, note in large:
        g = f"{gbps:.1f}" if gbps else "-"
        p = f"{pct:.0f}%" if pct else "-"
        print(f"| {name} | {dt} | {tn:.2f} | {tc:.2f} | {s:.2f}x | {to:.2f} | {so:.2f}x | {g} "
              f"| {p} | {note} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, 1M elements")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument("--threads", type=int, default=2, help="PyTorch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torchneuron.set_fallback_mode("silent")
    warnings.simplefilter("ignore")
    n = 2**20 if args.quick else 2**24
    repeats = 3 if args.quick else 7
    iters = 200 if args.quick else 2000
    machine = _machine()
    # Small ops first: after the multi-threaded CPU copy of memcpy_gbps, the
    # rest of the run measured every small op (CPU and neuron) 1.5-2x slower,
    # and neuron's two threads (caller and stream worker) lost more of it.
    small = small_ops(iters, repeats)
    memcpy = memcpy_gbps(n, repeats)
    large = large_ops(n, repeats, (torch.float32, torch.bfloat16), memcpy)
    (print_markdown if args.markdown else print_text)(small, large, memcpy, n, args.threads, machine)


if __name__ == "__main__":
    main()
