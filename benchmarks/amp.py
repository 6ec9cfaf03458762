"""The gradient scaler's unscale, isin and a GPT-2 generate() on neuron versus PyTorch CPU.

- _amp_foreach_non_finite_check_and_unscale_ over a GPT-2-small-sized set of
  gradients (124M parameters' worth in float32: 2 GB of traffic at each side;
  --small uses a tenth of it), and the check-only form (inv_scale 1);
- isin of 1M int64 token ids in 50k ids (the sort path) and in 4 (the
  compare path);
- greedy generate() of 32 tokens with a small GPT-2 (2 layers, 64 wide):
  launch-bound work of a few thousand tiny ops.
Each time is the median of several runs in this process (best run too); a
ratio is CPU time / neuron time (above 1.0: neuron is faster). PyTorch CPU
runs with 2 threads unless --cpu-threads says otherwise.

    python benchmarks/amp.py [--repeats N] [--cpu-threads T] [--small]
"""

import argparse
import copy
import os

import torch
import torchneuron  # noqa: F401

from timing import median_and_best as seconds

# GPT-2 small's parameter shapes (12 layers, 768 wide, 50257 tokens).
GPT2_SHAPES = [(50257, 768), (1024, 768)] + 12 * [
    (768,), (768,), (768, 2304), (2304,), (768, 768), (768,), (768,), (768,),
    (768, 3072), (3072,), (3072, 768), (768,)] + [(768,), (768,)]


def row(name, dev, cpu):
    (t_dev, b_dev), (t_cpu, b_cpu) = dev, cpu
    print(f"{name:<34}{t_dev * 1e3:>10.2f}{t_cpu * 1e3:>9.2f}{t_cpu / t_dev:>7.2f}"
          f"  {b_dev * 1e3:>10.2f}{b_cpu * 1e3:>8.2f}{b_cpu / b_dev:>7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--small", action="store_true", help="a tenth of the gradients")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    sync = torch.neuron.synchronize

    print(f"CPU threads: {args.cpu_threads}; median of {args.repeats} (best after)")
    print(f"{'case':<34}{'neuron ms':>10}{'cpu ms':>9}{'ratio':>7}  {'best: neuron':>10}{'cpu':>8}{'ratio':>7}")
    shapes = GPT2_SHAPES[::10] if args.small else GPT2_SHAPES
    grads_cpu = [torch.randn(s) for s in shapes]
    grads_dev = [g.to("neuron") for g in grads_cpu]
    n = sum(g.numel() for g in grads_cpu)
    for inv in (0.5, 1.0):
        def unscale(grads, device, inv=inv):
            found = torch.zeros((), device=device)
            torch._amp_foreach_non_finite_check_and_unscale_(
                grads, found, torch.full((), inv, device=device))
        label = f"unscale {n / 1e6:.0f}M f32" + (" (check only)" if inv == 1 else "")
        row(label, seconds(lambda: unscale(grads_dev, "neuron"), sync, args.repeats),
            seconds(lambda: unscale(grads_cpu, "cpu"), lambda: None, args.repeats))

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 50257, (1 << 20,), generator=g)
    for m in (50000, 4):
        tests = torch.randint(0, 50257, (m,), generator=g)
        ids_dev, tests_dev = ids.to("neuron"), tests.to("neuron")
        row(f"isin 1M int64 in {m}", seconds(lambda: torch.isin(ids_dev, tests_dev), sync, args.repeats),
            seconds(lambda: torch.isin(ids, tests), lambda: None, args.repeats))

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        import transformers
    except ImportError:
        print("generate: transformers is not installed (pip install -e .[test])")
        return
    config = transformers.GPT2Config(vocab_size=1000, n_positions=128, n_embd=64, n_layer=2,
                                     n_head=4, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    cpu = transformers.GPT2LMHeadModel(config).eval()
    dev = copy.deepcopy(cpu).to("neuron")
    dev.tie_weights()
    prompt = torch.randint(1, 1000, (2, 8), generator=g)

    def generate(model, x):
        with torch.no_grad():
            model.generate(x, max_new_tokens=32, do_sample=False, pad_token_id=0)
    row("gpt2 (tiny) generate 32 tokens", seconds(lambda: generate(dev, prompt.to("neuron")), sync, args.repeats),
        seconds(lambda: generate(cpu, prompt), lambda: None, args.repeats))


if __name__ == "__main__":
    main()
