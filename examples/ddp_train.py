"""Trains the demo's GPT with DistributedDataParallel on `neuron`, one rank
per process, and prints each rank's loss (issue 16).

    torchrun --nproc-per-node 2 examples/ddp_train.py            # neuron
    torchrun --nproc-per-node 2 examples/ddp_train.py --device cpu --backend gloo

Every rank starts from the same weights (DDP broadcasts rank 0's) and
trains on its own batches; DDP averages the gradients, so every rank's
parameters stay identical. The second command is the same run on the CPU
with gloo, for comparing rank by rank: the losses agree to rounding.
"""

import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torchneuron  # noqa: F401  (the "neuron" backend; also autoloaded)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT, GPTConfig, batches, load_corpus  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="neuron", choices=["neuron", "cpu"])
    ap.add_argument("--backend", default=None, help='process group backend (default: "neuron", or gloo on cpu)')
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16, help="sequences per rank and step")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds a collective may wait for the other ranks before it fails")
    args = ap.parse_args()
    backend = args.backend or ("neuron" if args.device == "neuron" else "gloo")

    timeout = None if args.timeout is None else datetime.timedelta(seconds=args.timeout)
    dist.init_process_group(backend, timeout=timeout)  # env:// from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    # With "neuron", each rank is on device LOCAL_RANK (the backend picks it).
    device = torch.device(args.device, torch.neuron.current_device()) if args.device == "neuron" else "cpu"

    tok, corpus = load_corpus()
    cfg = GPTConfig(vocab_size=tok.vocab_size)
    torch.manual_seed(0)
    model = DDP(GPT(cfg).to(device))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = batches(corpus, args.batch, cfg.block_size, args.steps, seed=1 + rank)  # each rank its own

    start = time.perf_counter()
    for step, (x, y) in enumerate(data):
        _, loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 5 == 0 or step == args.steps - 1:
            print(f"rank {rank}/{world} step {step:3d} loss {loss.item():.5f}", flush=True)
    if args.device == "neuron":
        torch.neuron.synchronize()
    elapsed = time.perf_counter() - start
    tokens = args.steps * args.batch * cfg.block_size * world
    if rank == 0:
        print(f"{backend} on {args.device}: {world} ranks, {tokens / elapsed:,.0f} tokens/s", flush=True)
    dist.barrier()  # no rank tears its connections down while a peer still uses them
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
