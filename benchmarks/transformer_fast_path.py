"""The inference fast path of nn.TransformerEncoderLayer, nn.TransformerEncoder
and nn.MultiheadAttention (eval mode, no grad) on neuron versus PyTorch CPU's
own fast path: _transformer_encoder_layer_fwd, _native_multi_head_attention
and, with a key padding mask in TransformerEncoder, the nested-tensor ops;
and the attention's masked softmax alone (_masked_softmax, one runtime pass
on neuron) against the CPU's.
Neuron and CPU runs alternate turn by turn (timing.interleaved); each time
is the median (best shown too); ratio = CPU time / neuron time (above 1.0:
neuron is faster). PyTorch CPU runs with 2 threads unless --cpu-threads
says otherwise.

    python benchmarks/transformer_fast_path.py [--repeats N] [--cpu-threads T] [--only masked]
"""

import argparse
import copy

import torch
import torch.nn as nn
import torchneuron

from timing import interleaved


ONLY = ""


def row(name, cpu_mod, make_args, repeats):
    if ONLY not in name:
        return
    dev_mod = copy.deepcopy(cpu_mod).to("neuron")
    cpu_args = make_args()
    dev_args = [a.to("neuron") for a in cpu_args]
    cpu_kwargs, dev_kwargs = {}, {}
    if isinstance(cpu_args[-1], torch.Tensor) and cpu_args[-1].dtype == torch.bool:  # a key padding mask
        cpu_kwargs["src_key_padding_mask"], dev_kwargs["src_key_padding_mask"] = cpu_args.pop(), dev_args.pop()
    torchneuron.clear_op_tracking()
    with torch.no_grad():
        nm, nb, cm, cb = interleaved(lambda: dev_mod(*dev_args, **dev_kwargs),
                                     lambda: cpu_mod(*cpu_args, **cpu_kwargs), repeats)
    fallback = "" if not torchneuron.get_fallback_ops() else f"  fallback: {torchneuron.get_fallback_ops()}"
    print(f"{name:<52}{nm * 1e3:9.2f}{nb * 1e3:9.2f}{cm * 1e3:9.2f}{cb * 1e3:9.2f}{cm / nm:7.2f}{fallback}")


def op_row(name, fn, cpu_args, repeats):
    if ONLY not in name:
        return
    dev_args = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in cpu_args]
    torchneuron.clear_op_tracking()
    nm, nb, cm, cb = interleaved(lambda: fn(*dev_args), lambda: fn(*cpu_args), repeats)
    fallback = "" if not torchneuron.get_fallback_ops() else f"  fallback: {torchneuron.get_fallback_ops()}"
    print(f"{name:<52}{nm * 1e3:9.2f}{nb * 1e3:9.2f}{cm * 1e3:9.2f}{cb * 1e3:9.2f}{cm / nm:7.2f}{fallback}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--only", default="", help="run the rows whose name contains this text")
    args = parser.parse_args()
    global ONLY
    ONLY = args.only
    torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    B, L, D, H, F = 8, 128, 256, 8, 1024
    print(f"CPU threads: {args.cpu_threads}; median of {args.repeats} (best shown too); ratio = CPU / neuron")
    print(f"{'case':<52}{'neuron ms':>9}{'best':>9}{'cpu ms':>9}{'best':>9}{'ratio':>7}")

    def x():
        return [torch.randn(B, L, D)]

    def x_padded():
        pad = torch.zeros(B, L, dtype=torch.bool)
        for b in range(B):
            pad[b, L - 8 * b:] = True  # sequences of L, L-8, ... L-56 tokens
        return [torch.randn(B, L, D), pad]

    for norm_first in (False, True):
        layer = nn.TransformerEncoderLayer(D, H, F, 0.0, batch_first=True, norm_first=norm_first).eval()
        row(f"EncoderLayer [{B},{L},{D}] h{H} ff{F} norm_first={norm_first}", layer, x, args.repeats)
    layer = nn.TransformerEncoderLayer(D, H, F, 0.0, batch_first=True).eval()
    row(f"EncoderLayer [{B},{L},{D}] + key padding mask", layer, x_padded, args.repeats)
    encoder = nn.TransformerEncoder(copy.deepcopy(layer), 2, enable_nested_tensor=True).eval()
    row(f"Encoder 2 layers [{B},{L},{D}] + padding mask (nested)", encoder, x_padded, args.repeats)
    mha = nn.MultiheadAttention(D, H, batch_first=True).eval()

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, q):
            return self.mha(q, q, q, need_weights=False)[0]

    row(f"MultiheadAttention self [{B},{L},{D}] h{H}", SelfAttention().eval(), x, args.repeats)

    # The attention's scores [B, H, L, L] with a (B, L) key padding mask (type 1)
    # or a mask of their own shape (type 2).
    scores, pad = torch.randn(B, H, L, L), x_padded()[1]
    op_row(f"_masked_softmax [{B},{H},{L},{L}] padding mask (type 1)", torch._masked_softmax,
           [scores, pad, 3, 1], args.repeats)
    op_row(f"_masked_softmax [{B},{H},{L},{L}] full mask (type 2)", torch._masked_softmax,
           [scores, torch.rand(B, H, L, L) < 0.2, 3, 2], args.repeats)


if __name__ == "__main__":
    main()
