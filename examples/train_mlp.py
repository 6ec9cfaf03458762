"""Trains a small MLP on the neuron device for a few steps.

The demo of the foundation: the model moves with .to("neuron"), the
optimizer steps on the device, and at the end the script reports which ATen
ops ran natively and which fell back to the CPU (most compute ops fall back
until the native kernels land). The same run on the CPU gives the reference
losses.
"""

import time

import torch
import torchneuron

STEPS = 20


def make_data(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(512, 32, generator=g)
    w = torch.randn(32, 4, generator=g)
    y = (x @ w + 0.1 * torch.randn(512, 4, generator=g)).argmax(dim=1)
    return x, y


def train(device: str) -> list:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = (t.to(device) for t in make_data())
    losses = []
    for step in range(STEPS):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    print(f"accelerator: {torch.accelerator.current_accelerator()}, "
          f"{torch.neuron.device_count()} x {torch.neuron.get_device_name(0)}")
    torchneuron.set_fallback_mode("silent")  # reported below instead of warned
    torchneuron.clear_op_tracking()
    start = time.perf_counter()
    neuron_losses = train("neuron")
    neuron_time = time.perf_counter() - start
    fallback = torchneuron.get_fallback_ops()
    executed = torchneuron.get_executed_ops()
    cpu_losses = train("cpu")
    for step in range(0, STEPS, 4):
        print(f"step {step:2d}  loss {neuron_losses[step]:.4f}  (cpu {cpu_losses[step]:.4f})")
    print(f"step {STEPS - 1:2d}  loss {neuron_losses[-1]:.4f}  (cpu {cpu_losses[-1]:.4f})")
    worst = max(abs(a - b) for a, b in zip(neuron_losses, cpu_losses))
    print(f"{STEPS} steps on neuron in {neuron_time:.2f}s; largest loss difference from CPU: {worst:.2e}")
    native = sorted(op for op in executed if op not in fallback)
    print(f"\nnative ops ({len(native)}): {', '.join(native)}")
    print(f"CPU fallback ops ({len(fallback)}):")
    for op, count in sorted(fallback.items(), key=lambda kv: -kv[1]):
        print(f"  {op:<45} {count:5d} calls")
    print(f"\npeak device memory: {torch.neuron.max_memory_allocated() / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
