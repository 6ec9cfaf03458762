"""torch.fft on neuron (the runtime's FFT_C2C / FFT_R2C / FFT_C2R kernels)
versus PyTorch CPU (MKL or pocketfft, whichever the build uses) in the same
run, turn by turn (timing.interleaved): a 1-D complex FFT of length 4096
over a batch of 256, a 2-D 512x512 complex FFT, the rfft of 1M floats, a
prime length (4099, Bluestein) over a batch of 64, and the irfft2 of a
512x512 image's half spectrum.

Each time is the median of --repeats alternating runs (best shown too);
ratio = CPU time / neuron time (above 1.0 neuron is faster). PyTorch CPU
runs with --cpu-threads threads (default 2).

    python benchmarks/fft.py [--repeats N] [--cpu-threads T]
"""

import argparse

import torch
import torchneuron  # noqa: F401

from timing import interleaved


def case(name, make, fn, repeats):
    inputs = make()
    dev_inputs = [t.to("neuron") for t in inputs]
    nm, nb, cm, cb = interleaved(lambda: fn(*dev_inputs), lambda: fn(*inputs), repeats)
    print(f"{name:<40}{nm * 1e3:9.2f}{nb * 1e3:9.2f}{cm * 1e3:9.2f}{cb * 1e3:9.2f}{cm / nm:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--cpu-threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    r = args.repeats
    print(f"CPU threads: {args.cpu_threads}; median of {r} (best shown too); ratio = CPU / neuron")
    print(f"{'case':<40}{'neuron ms':>9}{'best':>9}{'cpu ms':>9}{'best':>9}{'ratio':>7}")
    for dtype in (torch.complex64, torch.complex128):
        tag = "c64" if dtype == torch.complex64 else "c128"
        case(f"fft 4096 x batch 256 {tag}", lambda: [torch.randn(256, 4096, dtype=dtype)], torch.fft.fft, r)
        case(f"fft2 512x512 {tag}", lambda: [torch.randn(512, 512, dtype=dtype)], torch.fft.fft2, r)
        case(f"fft 4099 (prime) x batch 64 {tag}", lambda: [torch.randn(64, 4099, dtype=dtype)], torch.fft.fft, r)
    for dtype in (torch.float32, torch.float64):
        tag = "f32" if dtype == torch.float32 else "f64"
        case(f"rfft 1M {tag}", lambda: [torch.randn(1 << 20, dtype=dtype)], torch.fft.rfft, r)
        case(f"irfft2 512x257 -> 512x512 {tag}",
             lambda: [torch.fft.rfft2(torch.randn(512, 512, dtype=dtype))], torch.fft.irfft2, r)


if __name__ == "__main__":
    main()
