"""The walkthrough of docs/profiling.md: profile a training step of the
demo GPT (examples/gpt.py) on neuron, print the tables, look for
fallbacks, take a memory snapshot, and draw the chrome trace's lanes as a
picture (SVG, no plotting library needed).

    python docs/profile_gpt.py [--out DIR]      # writes DIR/trace.json,
                                                # DIR/trace.svg, DIR/snapshot.pickle
"""

import argparse
import html
import json
import os
import pickle
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import torchneuron
from torchneuron import profiler as tn_profiler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from gpt import GPT, GPTConfig, batches, load_corpus  # noqa: E402

# Fill colours by kind of event (the trace's "cat", or the lane's kind).
COLOURS = {"cpu_op": "#8fb3d9", "kernel": "#e6862e", "gpu_memcpy": "#59a14f",
           "gpu_user_annotation": "#b07aa1", "privateuse1_runtime": "#bab0ac", "estimate": "#f1ce63"}


def lanes_of(trace: dict, max_cpu_lanes: int = 2):
    """[(lane name, [(start us, duration us, name, colour, depth)])]: the CPU
    threads that ran the most ops (the caller's and autograd's), then each
    neuron stream and its estimate lane."""
    names = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    by_lane = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        by_lane.setdefault((e["pid"], e["tid"]), []).append(e)
    neuron, cpu = [], []
    for key, events in by_lane.items():
        name = str(names.get(key, f"thread {key[1]}"))
        if "stream" in name:
            neuron.append((name, events))
        elif any(e.get("cat") == "cpu_op" for e in events):
            cpu.append((f"CPU thread {key[1]}", events))
    cpu.sort(key=lambda lane: -len(lane[1]))
    neuron.sort(key=lambda lane: (lane[0].startswith("estimated"), lane[0]))
    lanes = []
    for name, events in cpu[:max_cpu_lanes] + neuron:
        events = sorted(events, key=lambda e: (e["ts"], -e["dur"]))
        stack, rows = [], []
        for e in events:  # depth: how many open spans contain it
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            kind = "estimate" if name.startswith("estimated") else str(e.get("cat", "")).lower()
            if kind == "cpu_op" and len(stack) > 1:
                stack.append(e["ts"] + e["dur"])
                continue  # the ops that the user's code called, and the ones under them
            rows.append((float(e["ts"]), float(e["dur"]), e["name"],
                         COLOURS.get(kind, "#9c755f"), len(stack)))
            stack.append(e["ts"] + e["dur"])
        lanes.append((name, rows))
    return lanes


def render_svg(lanes, width: int = 1400, lane_height: int = 34, label_width: int = 230) -> str:
    """The lanes as an SVG timeline: a row per lane, a box per event (nested
    events lower and thinner), time along the bottom."""
    starts = [s for _, rows in lanes for s, *_ in rows]
    ends = [s + d for _, rows in lanes for s, d, *_ in rows]
    if not starts:
        raise ValueError("the trace has no events to draw")
    t0, span = min(starts), max(max(ends) - min(starts), 1.0)
    plot = width - label_width - 10
    height = lane_height * len(lanes) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    for i, (name, rows) in enumerate(lanes):
        y = 10 + i * lane_height
        out.append(f'<text x="4" y="{y + lane_height / 2 + 4}">{html.escape(name[:34])}</text>')
        out.append(f'<line x1="{label_width}" x2="{width - 10}" y1="{y + lane_height - 2}" '
                   f'y2="{y + lane_height - 2}" stroke="#ddd"/>')
        for start, dur, title, colour, depth in rows:
            inset = min(depth, 3) * 5
            x = label_width + (start - t0) / span * plot
            w = max(dur / span * plot, 0.5)
            # A name to hover over where the box is wide enough to find.
            tip = f"<title>{html.escape(title)} ({dur:.1f} us)</title>" if w >= 2 else ""
            out.append(f'<rect x="{x:.1f}" y="{y + 2 + inset}" width="{w:.1f}" '
                       f'height="{lane_height - 6 - 2 * inset}" fill="{colour}" stroke="white" '
                       f'stroke-width="0.4">{tip}</rect>')
    axis_y = 10 + len(lanes) * lane_height + 16
    for k in range(6):
        x = label_width + k * plot / 5
        out.append(f'<text x="{x:.0f}" y="{axis_y}" text-anchor="middle">'
                   f'{k * span / 5 / 1000:.1f} ms</text>')
    out.append("</svg>")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="profile_out", help="directory for the files written")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    tok, data = load_corpus()
    cfg = GPTConfig(vocab_size=tok.vocab_size)
    torch.manual_seed(0)
    model = GPT(cfg).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    steps = batches(data, args.batch_size, cfg.block_size, 4, seed=1)

    def step(x, y):
        _, loss = model(x.to("neuron"), y.to("neuron"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    torchneuron.set_fallback_mode("silent")
    torchneuron.clear_op_tracking()
    for x, y in steps[:3]:  # warm up: the allocator's cache, the streams
        step(x, y)
    torch.neuron.synchronize()

    # 1. Profile a step: CPU ops and the neuron streams' device activity.
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        step(*steps[3])
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=12))
    print(tn_profiler.summary(prof))
    trace_path = os.path.join(args.out, "trace.json")
    prof.export_chrome_trace(trace_path)

    # 2. The trace's lanes as a picture.
    with open(trace_path) as f:
        svg = render_svg(lanes_of(json.load(f)))
    with open(os.path.join(args.out, "trace.svg"), "w") as f:
        f.write(svg)

    # 3. Fallbacks: ops that ran on the CPU (expected: none).
    print("fallbacks:", torchneuron.get_fallback_ops() or "none")

    # 4. A memory snapshot of one step, for PyTorch's memory viewer.
    torch.neuron.memory._record_memory_history(max_entries=100000)
    step(*steps[0])
    snapshot_path = os.path.join(args.out, "snapshot.pickle")
    torch.neuron.memory._dump_snapshot(snapshot_path)
    torch.neuron.memory._record_memory_history(enabled=None)
    with open(snapshot_path, "rb") as f:
        snapshot = pickle.load(f)
    blocks = sum(len(segment["blocks"]) for segment in snapshot["segments"])
    events = sum(len(trace) for trace in snapshot["device_traces"])
    print(f"memory snapshot: {len(snapshot['segments'])} segments, {blocks} blocks, "
          f"{events} events recorded")
    print(f"wrote {trace_path}, {os.path.join(args.out, 'trace.svg')} and {snapshot_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
