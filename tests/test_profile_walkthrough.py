"""docs/profile_gpt.py, the profiling walkthrough's script: its picture of
a chrome trace has the CPU thread and the neuron stream's lanes (measured
and estimated), a box per event, and is well-formed SVG. (The script's
whole run, a few GPT steps, is the docs'; this profiles two ops.)"""

import importlib.util
import json
import os
import xml.etree.ElementTree as ET

import torch
from torch.profiler import ProfilerActivity, profile

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")


def _script():
    spec = importlib.util.spec_from_file_location("profile_gpt", os.path.join(DOCS, "profile_gpt.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_trace_picture_has_cpu_and_stream_lanes(tmp_path):
    script = _script()
    x = torch.randn(64, 64, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        (x @ x).softmax(-1).cpu()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    lanes = script.lanes_of(json.loads(path.read_text()))
    names = [name for name, _ in lanes]
    assert names[0].startswith("CPU thread")
    assert "neuron:0 stream 0" in names and "estimated trn2 (neuron:0 stream 0)" in names
    stream = dict(lanes)["neuron:0 stream 0"]
    kernels = {title for _, _, title, _, _ in stream}
    assert {"gemm", "softmax", "memcpy"} <= kernels, kernels
    svg = ET.fromstring(script.render_svg(lanes))
    rects = svg.findall("{http://www.w3.org/2000/svg}rect")
    assert len(rects) == 1 + sum(len(rows) for _, rows in lanes)  # the background, then the boxes
    texts = [t.text for t in svg.findall("{http://www.w3.org/2000/svg}text")]
    assert "neuron:0 stream 0" in texts
