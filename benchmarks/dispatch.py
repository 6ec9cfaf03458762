"""Host overhead of tiny ops and host<->device copy bandwidth.

Part 1: per-op host cost of tiny ops (fill_, copy_, empty and add_ of one
element) on neuron versus the same op on PyTorch CPU,
timed over a loop that ends with a synchronize (so queued work is paid for),
and of add_ followed by a synchronize at every call (a queued op's whole
round trip).
Part 2: host->device and device->host copy bandwidth, from pageable and from
pinned host memory, for 1 MiB..256 MiB, versus a plain memcpy of the same
size between two host buffers. Every figure is the median of several trials
measured in this run; ratios compare neuron with the CPU baseline.

    python benchmarks/dispatch.py [--quick]
"""

import argparse
import ctypes

import torch
import torchneuron  # noqa: F401

from timing import median_time





def per_op_us(op, iters: int, repeats: int, sync) -> float:
    def loop():
        for _ in range(iters):
            op()
        sync()

    loop()  # warm up (allocator caches, worker threads)
    return median_time(loop, repeats, warmup=False) / iters * 1e6


def sync_of(t: torch.Tensor):
    return torch.neuron.synchronize if t.device.type == "neuron" else (lambda: None)


def add_and_synchronize(t: torch.Tensor, s: torch.Tensor):
    sync = sync_of(t)

    def op():
        t.add_(s)
        sync()

    return op


def tiny_ops(iters: int, repeats: int) -> None:
    print(f"Per-op host overhead, median of {repeats} loops of {iters} calls (lower is better)")
    print(f"{'op':<28}{'neuron us':>11}{'cpu us':>10}{'neuron/cpu':>12}")
    cases = {
        "fill_ (1 element)": lambda t, s: (lambda: t.fill_(1.5)),
        "copy_ (1 element, same dev)": lambda t, s: (lambda: t.copy_(s)),
        "empty (1 element)": lambda t, s: (lambda: torch.empty(1, device=t.device)),
        "add_ (1 element)": lambda t, s: (lambda: t.add_(s)),
        "add_ + synchronize (1 el.)": add_and_synchronize,
    }
    for name, make in cases.items():
        results = {}
        for device in ("neuron", "cpu"):
            t = torch.zeros(1, device=device)
            s = torch.ones(1, device=device)
            sync = sync_of(t)
            results[device] = per_op_us(make(t, s), iters, repeats, sync)
        print(f"{name:<28}{results['neuron']:>11.2f}{results['cpu']:>10.2f}"
              f"{results['neuron'] / results['cpu']:>11.2f}x")


def memcpy_seconds(dst: torch.Tensor, src: torch.Tensor, repeats: int) -> float:
    n = src.numel() * src.element_size()
    d, s = dst.data_ptr(), src.data_ptr()
    ctypes.memmove(d, s, n)
    return median_time(lambda: ctypes.memmove(d, s, n), repeats, warmup=False)


def copy_seconds(dst: torch.Tensor, src: torch.Tensor, repeats: int) -> float:
    dst.copy_(src)
    torch.neuron.synchronize()

    def once():
        dst.copy_(src, non_blocking=True)
        torch.neuron.synchronize()

    return median_time(once, repeats, warmup=False)


def bandwidth(sizes_mib, repeats: int) -> None:
    print(f"\nCopy bandwidth, GB/s, median of {repeats} (higher is better); ratio = copy / memcpy")
    print(f"{'size':>8}{'memcpy':>9}{'H2D':>8}{'ratio':>7}{'H2D pin':>9}{'ratio':>7}"
          f"{'D2H':>8}{'ratio':>7}{'D2H pin':>9}{'ratio':>7}")
    for mib in sizes_mib:
        n = mib * 2**20 // 4
        host_a = torch.rand(n)
        host_b = torch.empty(n)
        pinned = torch.empty(n, pin_memory=True)
        pinned.copy_(host_a)
        device = torch.empty(n, device="neuron")
        gb = n * 4 / 1e9
        base = gb / memcpy_seconds(host_b, host_a, repeats)
        rates = [
            gb / copy_seconds(device, host_a, repeats),
            gb / copy_seconds(device, pinned, repeats),
            gb / copy_seconds(host_b, device, repeats),
            gb / copy_seconds(pinned, device, repeats),
        ]
        row = "".join(f"{r:>8.2f}{r / base:>6.2f}x" if i % 2 == 0 else f"{r:>9.2f}{r / base:>6.2f}x"
                      for i, r in enumerate(rates))
        print(f"{mib:>5}MiB{base:>9.2f}{row}")
        del device, pinned
        torch.neuron.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations and sizes")
    args = parser.parse_args()
    torchneuron.set_fallback_mode("silent")
    if args.quick:
        tiny_ops(iters=2000, repeats=5)
        bandwidth([1, 16], repeats=3)
    else:
        tiny_ops(iters=20000, repeats=9)
        bandwidth([1, 4, 16, 64, 256], repeats=7)


if __name__ == "__main__":
    main()
