"""Trains a small character-level GPT on the bundled corpus on `neuron`.

The demo of issue 4: the model (examples/gpt.py: embeddings, causal SDPA,
GELU MLP, LayerNorm, tied head) and fused AdamW run on the neuron device
with a progress bar; then the same steps from the same initial weights on
the same batches run in PyTorch's CPU eager mode, for the throughput ratio
and the loss to compare; then the neuron model writes a short sample. At
the end the script lists the ATen ops that fell back to the CPU (none is
expected). The same steps then run with the model compiled by
torch.compile(backend="neuron") (issue 15), and the script prints eager and
compiled throughput side by side, with the compile time.

    python examples/train_gpt.py             # about 1-3 minutes on 2 cores
    python examples/train_gpt.py --steps 50  # shorter
"""

import argparse
import copy
import math
import os
import sys
import time

import torch

import torchneuron

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT, GPTConfig, batches, load_corpus  # noqa: E402


def lr_at(step: int, steps: int, peak: float, warmup: int = 10) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


class Progress:
    """A plain-text progress bar: redrawn in place on a terminal, a line
    every tenth of the run otherwise (logs, CI)."""

    def __init__(self, total: int, label: str, width: int = 30):
        self.total, self.label, self.width = total, label, width
        self.tty = sys.stdout.isatty()
        self.start = self.last = time.perf_counter()

    def due(self, done: int) -> bool:
        """Whether to redraw after `done` steps: at most 5 times a second on
        a terminal (reading the loss waits for the device), every tenth of
        the run otherwise, and always at the end."""
        if done == self.total:
            return True
        if self.tty:
            return time.perf_counter() - self.last >= 0.2
        return done % max(1, self.total // 10) == 0

    def update(self, done: int, loss: float):
        self.last = time.perf_counter()
        filled = self.width * done // self.total
        rate = done / max(time.perf_counter() - self.start, 1e-9)
        line = (f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] "
                f"{done:4d}/{self.total} loss {loss:.3f} {rate:5.1f} steps/s")
        print("\r" + line if self.tty else line, end="" if self.tty else "\n", flush=True)

    def close(self):
        if self.tty:
            print()


def train(model, device: str, data, lr: float, label: str, warmup_steps: int = 3):
    """Trains model (already on device) on the (x, y) batches; returns the
    losses and the tokens per second over the steps after `warmup_steps`."""
    opt = model.configure_optimizer(lr)
    # A run no longer than the warm-up is timed whole (first steps included).
    warmup_steps = min(warmup_steps, len(data) - 1)
    bar = Progress(len(data), label)
    losses = []
    sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)
    t0 = None
    for step, (x, y) in enumerate(data):
        if step == warmup_steps:
            sync()
            t0 = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, len(data), lr)
        _, loss = model(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.detach())
        if bar.due(step + 1):
            bar.update(step + 1, losses[-1].item())
    sync()
    elapsed = time.perf_counter() - t0
    bar.close()
    tokens = (len(data) - warmup_steps) * data[0][0].numel()
    return torch.stack(losses).cpu(), tokens / elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--sample-tokens", type=int, default=240)
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU comparison run")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile run")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be at least 1")

    print(f"accelerator: {torch.accelerator.current_accelerator()}, "
          f"{torch.neuron.device_count()} x {torch.neuron.get_device_name(0)}; "
          f"CPU threads: {torch.get_num_threads()}")
    tok, data = load_corpus()
    cfg = GPTConfig(vocab_size=tok.vocab_size)
    torch.manual_seed(0)
    cpu_model = GPT(cfg)
    neuron_model = copy.deepcopy(cpu_model).to("neuron")  # same initial weights
    initial_model = copy.deepcopy(cpu_model)  # the CPU run trains cpu_model
    n_params = sum(p.numel() for p in cpu_model.parameters())
    steps = batches(data, args.batch_size, cfg.block_size, args.steps, seed=1)
    print(f"corpus: {len(data):,} characters, vocabulary {tok.vocab_size}; model: "
          f"{cfg.n_layer} layers, {cfg.n_head} heads, width {cfg.n_embd}, {n_params / 1e6:.2f}M "
          f"parameters; batch {args.batch_size} x {cfg.block_size} tokens, {args.steps} steps\n")

    torchneuron.set_fallback_mode("silent")  # reported at the end instead of warned
    torchneuron.clear_op_tracking()
    torch.neuron.reset_peak_memory_stats()
    neuron_losses, neuron_tps = train(neuron_model, "neuron", steps, args.lr, "neuron")
    print(f"neuron:    {neuron_tps:9,.0f} tokens/s   final loss {neuron_losses[-1]:.3f}   "
          f"peak device memory {torch.neuron.max_memory_allocated() / 2**20:.1f} MiB")

    if not args.no_cpu:
        cpu_losses, cpu_tps = train(cpu_model, "cpu", steps, args.lr, "cpu   ")
        print(f"CPU eager: {cpu_tps:9,.0f} tokens/s   final loss {cpu_losses[-1]:.3f}")
        worst = (neuron_losses - cpu_losses).abs().max().item()
        print(f"neuron / CPU eager throughput: {neuron_tps / cpu_tps:.2f}x; "
              f"largest loss difference over {args.steps} steps: {worst:.2e}")

    if not args.no_compile:
        compiled_model = copy.deepcopy(initial_model).to("neuron")  # same initial weights again
        compiled = torch.compile(compiled_model, backend="neuron")
        torchneuron.metrics.clear_all()
        t0 = time.perf_counter()
        compiled(*(t.to("neuron") for t in steps[0]))[1].backward()  # compiles forward and backward
        torch.neuron.synchronize()
        compile_s = time.perf_counter() - t0
        compiled_model.zero_grad(set_to_none=True)
        rows = torchneuron.metrics.get_compilation_metrics()
        compiled_losses, compiled_tps = train(compiled, "neuron", steps, args.lr, "neuron compiled")
        worst = (compiled_losses - neuron_losses).abs().max().item()
        eager_nodes = sum(r["eager_nodes"] for r in rows)
        print(f"neuron compiled: {compiled_tps:9,.0f} tokens/s   final loss {compiled_losses[-1]:.3f}   "
              f"first step (compiling {len(rows)} graphs) {compile_s:.2f} s")
        print(f"neuron eager {neuron_tps:,.0f} tokens/s | neuron compiled {compiled_tps:,.0f} tokens/s: "
              f"{compiled_tps / neuron_tps:.2f}x; {sum(r['fused_groups'] for r in rows)} fused groups, "
              f"{eager_nodes} nodes left to eager; largest loss difference to eager {worst:.2e}")

    neuron_model.eval()
    prompt = "And God said"
    g = torch.Generator(device="neuron").manual_seed(0)
    out = neuron_model.generate(tok.encode(prompt)[None].to("neuron"), args.sample_tokens,
                                top_k=20, generator=g)
    print(f"\nsample (neuron, temperature 0.8, top-k 20):\n{'-' * 72}\n"
          f"{tok.decode(out[0].cpu())}\n{'-' * 72}")

    fallback = torchneuron.get_fallback_ops()
    executed = torchneuron.get_executed_ops()
    print(f"\n{len(executed)} distinct ATen ops ran on neuron; CPU fallbacks: "
          + ("none" if not fallback else ", ".join(f"{k} ({v})" for k, v in sorted(fallback.items()))))
    return 1 if fallback else 0


if __name__ == "__main__":
    sys.exit(main())
