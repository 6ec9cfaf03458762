"""Which op_db OpInfos still run through the CPU fallback for complex inputs.

Runs the first few complex samples of every OpInfo of PyTorch's op_db that
the CPU supports in that dtype on the neuron device, and lists the ops the
counted CPU fallback ran (torchneuron.get_fallback_ops() after
torchneuron.clear_op_tracking()). Not a test: a survey, for issue 20.

    python benchmarks/complex_fallbacks.py [--dtype complex128] [--samples 3] [--only index,take]
"""

from __future__ import annotations

import argparse
import collections
import warnings

import torch
import torchneuron
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_map


def to_neuron(x):
    return x.to("neuron") if isinstance(x, torch.Tensor) else x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="complex64", choices=["complex64", "complex128"])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated substrings of OpInfo names")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    only = [s for s in args.only.split(",") if s]
    warnings.simplefilter("ignore")

    by_opinfo: dict[str, collections.Counter] = {}
    errors: dict[str, str] = {}
    surveyed = 0
    for info in op_db:
        name = info.name + (f".{info.variant_test_name}" if info.variant_test_name else "")
        if only and not any(s in name for s in only):
            continue
        if dtype not in info.supported_dtypes("cpu"):
            continue
        surveyed += 1
        fallbacks: collections.Counter = collections.Counter()
        try:
            samples = info.sample_inputs("cpu", dtype, requires_grad=False)
            for k, sample in enumerate(samples):
                if k >= args.samples:
                    break
                inp = tree_map(to_neuron, sample.input)
                sargs = tree_map(to_neuron, sample.args)
                kwargs = tree_map(to_neuron, sample.kwargs)
                torchneuron.clear_op_tracking()
                try:
                    info.op(inp, *sargs, **kwargs)
                    torch.neuron.synchronize() if hasattr(torch, "neuron") else None
                except Exception as e:  # noqa: BLE001 - a survey records, never stops
                    errors.setdefault(name, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}")
                fallbacks.update(torchneuron.get_fallback_ops())
        except Exception as e:  # noqa: BLE001
            errors.setdefault(name, f"samples: {type(e).__name__}: {str(e)[:100]}")
        if fallbacks:
            by_opinfo[name] = fallbacks

    aten = collections.Counter()
    for c in by_opinfo.values():
        aten.update({op: 1 for op in c})
    print(f"# {args.dtype}: {surveyed} OpInfos surveyed, {len(by_opinfo)} with a CPU fallback, "
          f"{len(aten)} distinct aten ops fell back")
    for name in sorted(by_opinfo):
        print(f"{name}: {', '.join(sorted(by_opinfo[name]))}")
    print("# aten ops (number of OpInfos reaching each):")
    for op, n in sorted(aten.items()):
        print(f"  {op} {n}")
    if errors:
        print(f"# {len(errors)} OpInfos raised on neuron (first error each):")
        for name in sorted(errors):
            print(f"  {name}: {errors[name]}")


if __name__ == "__main__":
    main()
