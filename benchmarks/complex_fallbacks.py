"""Which op_db OpInfos still run through the CPU fallback, for complex inputs
(the default) or any dtype of the runtime.

Runs the first few samples of every OpInfo of PyTorch's op_db that the CPU
supports in that dtype on the neuron device, and lists the ops the counted
CPU fallback ran (torchneuron.get_fallback_ops() after
torchneuron.clear_op_tracking()). `--dtype all` surveys every runtime dtype
in turn and ends with the union. Not a test: a survey, for issue 20.

    python benchmarks/complex_fallbacks.py [--dtype complex128|float32|...|all] [--samples 3] [--only index,take]
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


# The dtypes the neuron runtime stores.
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="complex64", choices=DTYPES + ["all"])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated substrings of OpInfo names")
    args = parser.parse_args()
    only = [s for s in args.only.split(",") if s]
    warnings.simplefilter("ignore")
    union: dict[str, set] = collections.defaultdict(set)
    for name in DTYPES if args.dtype == "all" else [args.dtype]:
        for opinfo, ops in survey(name, args.samples, only).items():
            union[opinfo].add(f"{name}: {', '.join(sorted(ops))}")
    if args.dtype == "all":
        aten = sorted({op for lines in union.values() for line in lines
                       for op in line.split(": ", 1)[1].split(", ")})
        print(f"# all dtypes: {len(union)} OpInfos with a CPU fallback, {len(aten)} distinct aten ops: "
              + ", ".join(aten))
        for opinfo in sorted(union):
            print(f"{opinfo}: " + "; ".join(sorted(union[opinfo])))


def survey(dtype_name: str, samples_per_opinfo: int, only: list[str]) -> dict[str, collections.Counter]:
    """Prints and returns {OpInfo: Counter of fallback aten ops} at one dtype."""
    dtype = getattr(torch, dtype_name)

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
                if k >= samples_per_opinfo:
                    break
                inp = tree_map(to_neuron, sample.input)
                sargs = tree_map(to_neuron, sample.args)
                kwargs = tree_map(to_neuron, sample.kwargs)
                torchneuron.clear_op_tracking()
                try:
                    info.op(inp, *sargs, **kwargs)
                    torch.neuron.synchronize()
                except Exception as e:  # noqa: BLE001 - a survey records, never stops
                    errors.setdefault(name, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}")
                    torch.neuron.clear_error()  # an asynchronous error would refuse the next OpInfo's work
                fallbacks.update(torchneuron.get_fallback_ops())
        except Exception as e:  # noqa: BLE001
            errors.setdefault(name, f"samples: {type(e).__name__}: {str(e)[:100]}")
        if fallbacks:
            by_opinfo[name] = fallbacks

    aten = collections.Counter()
    for c in by_opinfo.values():
        aten.update({op: 1 for op in c})
    print(f"# {dtype_name}: {surveyed} OpInfos surveyed, {len(by_opinfo)} with a CPU fallback, "
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
    return by_opinfo


if __name__ == "__main__":
    main()
