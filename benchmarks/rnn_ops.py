"""Recurrent networks on neuron versus PyTorch CPU: nn.LSTM, nn.GRU, nn.RNN
and nn.LSTMCell, forward and forward+backward, at a small language-model
size. Each time is the median of several runs in this process (the best is
shown too); ratio = CPU time / neuron time (above 1.0: neuron is faster).
PyTorch CPU runs with 2 threads unless --cpu-threads says otherwise.

Note: nn.LSTM/GRU/RNN on neuron run our whole-sequence kernels
(torchneuron/csrc/nn_rnn_sequence.cpp): one input GEMM per layer and
direction, then per step the hidden GEMM and the fused cell, as ATen's CPU
path and oneDNN do. At this size the run is bound by the GEMMs' arithmetic
(per step [32,256] x [256,1024] for LSTM), not by per-op host cost: in CPU
time with one thread each, neuron is at 0.82x-1.4x of PyTorch CPU
(docs/performance.md, "Whole-sequence recurrent networks"). Rows below
1.0x on a loaded host are mostly the load (the CPU's two OpenMP threads
against neuron's queue, which runs one op at a time).

    python benchmarks/rnn_ops.py [--repeats N] [--cpu-threads T] [--quick]
"""

import argparse
import copy

import torch
import torch.nn as nn
import torchneuron  # noqa: F401

from vision_ops import case


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="shorter sequences (16 steps)")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    steps, batch, features, hidden = (16 if args.quick else 64), 32, 256, 256

    print(f"CPU threads: {args.cpu_threads}; median of {args.repeats} (best shown too); ratio = CPU / neuron")
    print(f"{'case':<44}{'neuron ms':>9}{'best':>9}{'cpu ms':>9}{'best':>9}{'GFLOP/s':>7}{'ratio':>7}")
    modules = {
        "LSTM 2 layers": nn.LSTM(features, hidden, num_layers=2),
        "LSTM bidirectional": nn.LSTM(features, hidden, bidirectional=True),
        "GRU 2 layers": nn.GRU(features, hidden, num_layers=2),
        "RNN tanh 2 layers": nn.RNN(features, hidden, num_layers=2),
    }
    for name, cpu_mod in modules.items():
        dev_mod = copy.deepcopy(cpu_mod).to("neuron")

        def run(x, cpu_mod=cpu_mod, dev_mod=dev_mod):
            return (dev_mod if x.device.type == "neuron" else cpu_mod)(x)[0]

        for bwd in (False, True):
            tag = "fwd+bwd" if bwd else "fwd"
            case(f"{name} [{steps},{batch},{features}]->{hidden} {tag}",
                 lambda: [torch.randn(steps, batch, features)], run, bwd, 0, args.repeats)
    cell = nn.LSTMCell(features, hidden)
    dev_cell = copy.deepcopy(cell).to("neuron")
    for bwd in (False, True):
        tag = "fwd+bwd" if bwd else "fwd"
        case(f"LSTMCell [{batch},{features}]->{hidden} {tag}",
             lambda: [torch.randn(batch, features), torch.randn(batch, hidden), torch.randn(batch, hidden)],
             lambda x, h, c: (dev_cell if x.device.type == "neuron" else cell)(x, (h, c))[0], bwd, 0,
             args.repeats)


if __name__ == "__main__":
    main()
