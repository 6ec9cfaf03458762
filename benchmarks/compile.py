"""torch.compile(backend="neuron") against neuron eager, CPU eager and Inductor on the CPU, same run.

(a) Training steps of the GPT of examples/gpt.py (forward, backward, fused
    AdamW step; the model compiled, the optimizer step eager) at the demo's
    size (examples/train_gpt.py: 2 layers, width 128, 4 heads, T=64, B=32)
    and at 4 layers, width 256, 8 heads, T=128, B=16: neuron compiled
    (backend="neuron"), neuron eager, CPU eager and Inductor on the CPU
    (backend="inductor"). Also the wall time of the first step, compilation
    included, of neuron compiled, Inductor and backend="aot_eager" (CPU),
    each in a fresh process of its own, from the same initial weights, with
    cold caches (fresh TORCHNEURON_CACHE_DIR and TORCHINDUCTOR_CACHE_DIR
    directories); each process compiles a tiny function with its backend
    first so that one-time imports are not charged to the model. (Measured
    one after another in one process, whichever backend went first paid
    Dynamo's one-time cost of tracing the model's code, about 3 s of the
    4-layer model's first step on a 2-core AMD EPYC: 5.3 s first vs 0.9 s
    for a second neuron model.)
(b) An 8-op float32 pointwise chain on 4M elements and a layer-norm + GELU
    block on (4096, 1024), compiled by neuron and by Inductor (CPU), against
    eager neuron and eager CPU (inference, no autograd). Neuron compiled runs
    its fused groups' generated code (docs/compile.md); "neuron tape" is the
    same graph compiled with TORCHNEURON_CODEGEN=0 (the register-level tape,
    the generated code's reference twin), a fifth side of the same turns.
(c) Host cost of a compiled graph: 50 small pointwise nodes on a tiny
    tensor, time per call over many calls synchronised at the end, beside
    one eager op launch (a tiny add), the same 50 ops eager, and the same
    graph compiled by Inductor on the CPU.

Method: the sides of a case take turns in blocks of calls
(timing.rotating_blocks; a neuron block ends with torch.neuron.synchronize),
so that drifts of the host and of other processes reach every side; figures
are medians per call. Results are kept alive until the block is
synchronised (a result freed before it is computed lets adaptive eager
execution skip its stores). Ratios are time ratios measured in this run (lower
is better for neuron compiled): compiled / Inductor, compiled / neuron
eager, and the first-step times of neuron compiled / Inductor and / aot_eager.

    python benchmarks/compile.py            # everything
    python benchmarks/compile.py --quick    # fewer samples
    python benchmarks/compile.py --case gpt --case kernels --case host

(d) --case chain-cpu (only when asked): the pointwise chain's CPU time per
    call, one thread per side (run with TORCHNEURON_NUM_THREADS=1 and
    --cpu-threads 1): neuron compiled (generated code), neuron tape and
    Inductor, alternating in rounds of 5 calls, time.process_time(). On a
    loaded host wall-clock medians swing by 2x; CPU time does not.

    TORCHNEURON_NUM_THREADS=1 python benchmarks/compile.py --case chain-cpu --cpu-threads 1
"""

import argparse
import collections
import copy
import json
import os
import shutil
import subprocess
import statistics
import sys
import tempfile
import time
import warnings

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--quick", action="store_true", help="fewer samples and steps (a smoke run)")
ap.add_argument("--samples", type=int, default=None, help="blocks per side (default 7, quick 3)")
ap.add_argument("--case", action="append", choices=["gpt", "kernels", "host", "chain-cpu"], default=None,
                help="run only this part (repeatable)")
ap.add_argument("--gpt", action="append", choices=["demo", "wide"], default=None,
                help="GPT sizes to run (default both)")
ap.add_argument("--first-step", choices=["neuron", "inductor", "aot_eager"], default=None,
                help=argparse.SUPPRESS)  # internal: one first step in this fresh process (JSON out)
ap.add_argument("--cpu-threads", type=int, default=None,
                help="torch.set_num_threads for the CPU sides (default: PyTorch's choice)")
args = ap.parse_args()

# Cold compile caches for this run only (and nothing written to ~/.cache).
_TMP = tempfile.mkdtemp(prefix="tn-bench-compile-")
os.environ["TORCHNEURON_CACHE_DIR"] = os.path.join(_TMP, "neuron")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_TMP, "inductor")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torchneuron  # noqa: E402
from torchneuron import metrics  # noqa: E402

from timing import host_line, rotating_blocks  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from gpt import GPT, GPTConfig, batches, load_corpus  # noqa: E402

# Every side of every case compiles the same code objects (GPT.forward, ...)
# with its own backend; keep all of them.
torch._dynamo.config.cache_size_limit = 64
if hasattr(torch._dynamo.config, "recompile_limit"):
    torch._dynamo.config.recompile_limit = 64
if hasattr(torch._dynamo.config, "accumulated_recompile_limit"):
    torch._dynamo.config.accumulated_recompile_limit = 1024


def sync(device):
    if device == "neuron":
        torch.neuron.synchronize()


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def ms(t):
    return f"{t * 1e3:.2f}"


def warm_backends(only=None):
    """Compiles a tiny function with each backend (or only that one) once,
    forward and backward, so that one-time imports and toolchain start-up
    are not charged to the first model step measured later."""
    for backend, device in (("neuron", "neuron"), ("inductor", "cpu"), ("aot_eager", "cpu")):
        if only is not None and backend != only:
            continue
        start = time.perf_counter()
        fn = torch.compile(lambda x: (x * 2 + 1).relu().sum(), backend=backend)
        x = torch.randn(8, device=device, requires_grad=True)
        fn(x).backward()
        sync(device)
        log(f"  warm-up compile {backend}: {time.perf_counter() - start:.1f} s")


# ------------------------------------------------------------------ (a) GPT

GPT_SIZES = {  # name: (layers, width, heads, block, batch)
    "demo": (2, 128, 4, 64, 32),   # examples/train_gpt.py's model and batch
    "wide": (4, 256, 8, 128, 16),  # benchmarks/train.py's wider case
}


class Trainer:
    """One side of the GPT case: a copy of the model on device, its fused
    AdamW, and the forward (compiled by backend, or eager)."""

    def __init__(self, model, device, backend, data):
        self.model = copy.deepcopy(model).to(device)
        self.opt = self.model.configure_optimizer(3e-4, fused=True)
        self.forward = torch.compile(self.model, backend=backend) if backend else self.model
        self.device, self.data, self.i = device, data, 0

    def step(self):
        x, y = self.data[self.i % len(self.data)]
        self.i += 1
        _, loss = self.forward(x.to(self.device), y.to(self.device))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss

    def first_step(self):
        """(seconds, loss) of the first step, synchronised."""
        start = time.perf_counter()
        loss = self.step()
        sync(self.device)
        return time.perf_counter() - start, loss.detach().float().cpu().item()


def gpt_model(size):
    layers, width, heads, seq, batch = GPT_SIZES[size]
    tok, corpus = load_corpus()
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=seq, n_layer=layers, n_head=heads, n_embd=width)
    torch.manual_seed(0)
    return GPT(cfg), batches(corpus, batch, seq, 4, seed=1)


def first_step_in_fresh_process(size, backend):
    """(seconds, loss, compilation rows) of the first step of a model
    compiled by backend, in a new interpreter with cold caches."""
    caches = tempfile.mkdtemp(dir=_TMP)
    env = dict(os.environ, TORCHNEURON_CACHE_DIR=os.path.join(caches, "neuron"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(caches, "inductor"))
    cmd = [sys.executable, os.path.abspath(__file__), "--first-step", backend, "--gpt", size]
    if args.cpu_threads:
        cmd += ["--cpu-threads", str(args.cpu_threads)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"first step of {backend} failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["seconds"], r["loss"], r["rows"]


def first_step_main():
    """--first-step: this process warms its backend, then times one first step."""
    torchneuron.set_fallback_mode("silent")
    warnings.simplefilter("ignore")
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    backend = args.first_step
    warm_backends(only=backend)
    model, data = gpt_model(args.gpt[0])
    metrics.clear_all()
    t = Trainer(model, "neuron" if backend == "neuron" else "cpu", backend, data)
    seconds, loss = t.first_step()
    # Generated kernels compiled in the background during the step, and
    # those still compiling when it ended (its groups ran their tapes).
    codegen = {k: metrics.get_counter_value("fuse.codegen." + k)
               for k in ("background", "pending", "kernels", "cache_hits", "runs")}
    print(json.dumps({"seconds": seconds, "loss": loss, "rows": metrics.get_compilation_metrics(),
                      "codegen": codegen}))


def gpt_case(size, samples, block):
    layers, width, heads, seq, batch = GPT_SIZES[size]
    model, data = gpt_model(size)
    name = f"GPT {layers}L {width}w T={seq} B={batch}"
    log(f"{name}:")

    # First steps, compilation included: each from the same initial weights
    # on the same batch, so the first losses must agree. The compiled ones
    # each in a fresh process (see the module docstring).
    metrics.clear_all()
    sides = {}
    first = {}
    losses = {}
    for key, backend in (("neuron compiled", "neuron"), ("Inductor", "inductor"), ("aot_eager", "aot_eager")):
        first[key], losses[key], compiled_rows = first_step_in_fresh_process(size, backend)
        log(f"  first step {key} (fresh process): {first[key]:.2f} s (loss {losses[key]:.5f})")
        if backend == "neuron":
            rows_ = compiled_rows
    for key, device, backend in (("neuron compiled", "neuron", "neuron"), ("Inductor", "cpu", "inductor"),
                                 ("neuron eager", "neuron", None), ("CPU eager", "cpu", None)):
        t = Trainer(model, device, backend, data)
        seconds, loss = t.first_step()
        if backend is None:
            first[key], losses[key] = seconds, loss
            log(f"  first step {key}: {first[key]:.2f} s (loss {losses[key]:.5f})")
        sides[key] = t
    eager_ops = sorted({op for r in rows_ for op in r["eager_ops"]})
    compile_info = (f"{len(rows_)} graphs ({', '.join(sorted({r['kind'] for r in rows_}))}), "
                    f"{sum(r['segments'] for r in rows_)} segments, {sum(r['fused_groups'] for r in rows_)} "
                    f"fused groups, {sum(r['eager_nodes'] for r in rows_)} eager nodes"
                    + (f" ({', '.join(eager_ops)})" if eager_ops else "")
                    + f"; neuron compile time {sum(r['compile_ms'] for r in rows_) / 1e3:.2f} s")
    log(f"  neuron compiled: {compile_info}")
    worst = max(abs(v - losses["CPU eager"]) for v in losses.values())

    # Warm-up steps, then the timed blocks, the sides taking turns (with
    # the generated kernels ready: they compile in the background).
    for t in sides.values():
        for _ in range(2):
            t.step()
        sync(t.device)
    wait_for_kernels()
    order = ["neuron compiled", "neuron eager", "CPU eager", "Inductor"]
    metrics.clear_all()
    results = rotating_blocks([(sides[k].step, sides[k].device == "neuron") for k in order], samples, block)
    steps_timed = sides["neuron compiled"].i
    c = {n: metrics.get_counter_value(n) for n in ("compile.launches", "compile.eager_nodes", "compile.graphs")}
    med = {k: r[0] for k, r in zip(order, results)}
    for k in order:
        log(f"  {k}: {ms(med[k])} ms/step")
    return {"name": name, "tokens": batch * seq, "med": med, "first": first, "worst_loss": worst,
            "compile_info": compile_info, "counters": c, "steps": steps_timed}


# ------------------------------------------------------------------ (b) kernels

def chain(x):
    """Eight pointwise ops, each result replacing the last (as in
    benchmarks/adaptive_eager.py)."""
    y = x * 1.5
    y = y + 0.25
    y = torch.relu(y)
    y = y * y
    y = y - 0.5
    y = torch.sigmoid(y)
    y = y * 3
    y = y.clamp(0, 2)
    return y


def ln_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


def kept(fn, n):
    """fn, keeping its last n results alive: a result dropped before the
    stream runs the op lets adaptive eager execution skip storing it (and
    a whole dead chain costs almost nothing), which no real program gets."""
    results = collections.deque(maxlen=n)
    return lambda: results.append(fn())


def tape_compiled(fn, args):
    """fn compiled by neuron without generated code (TORCHNEURON_CODEGEN=0
    while it compiles, no plan cache shared with the other side), called
    once; a copy of fn, so that Dynamo compiles it anew."""
    import types
    twin = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__ + "_tape")
    compiled = torch.compile(twin, backend="neuron", options={"cache": False})
    os.environ["TORCHNEURON_CODEGEN"] = "0"
    try:
        compiled(*args)
        torch.neuron.synchronize()
    finally:
        del os.environ["TORCHNEURON_CODEGEN"]
    return compiled


def wait_for_kernels():
    from torchneuron.compiler import wait_for_kernels as wait
    wait()


def codegen_counters():
    from torchneuron import metrics
    return {k: metrics.get_counter_value("fuse.codegen." + k) for k in ("kernels", "cache_hits", "runs", "fallbacks")}


def kernel_case(name, fn, make, exact, samples, block):
    log(f"{name}:")
    cpu_args = make()
    dev_args = [a.to("neuron") for a in cpu_args]
    neuron_c = torch.compile(fn, backend="neuron")
    inductor = torch.compile(fn, backend="inductor")
    with torch.no_grad():
        before = codegen_counters()
        start = time.perf_counter()
        got = neuron_c(*dev_args)
        torch.neuron.synchronize()
        t_nc = time.perf_counter() - start
        wait_for_kernels()  # compiled in the background; the first call ran the tape
        after = codegen_counters()
        made = {k: after[k] - before[k] for k in after}
        log(f"  generated code at the first call: {made['kernels']} compiled, {made['cache_hits']} from the "
            f"disk cache, {made['runs']} runs, {made['fallbacks']} fallbacks")
        tape = tape_compiled(fn, dev_args)
        tape_same = torch.equal(tape(*dev_args).cpu(), got.cpu())
        start = time.perf_counter()
        ind = inductor(*cpu_args)
        t_ind = time.perf_counter() - start
        want = fn(*dev_args)
        ref = fn(*cpu_args)
        if exact:
            check = "bitwise = eager neuron" if torch.equal(got.cpu(), want.cpu()) else "DIFFERS from eager neuron"
        else:
            err = (got.cpu() - want.cpu()).abs().max().item()
            check = f"max |compiled - eager neuron| {err:.1e}"
        err_cpu = (got.cpu() - ref).abs().max().item()
        err_ind = (ind - ref).abs().max().item()
        check += f"; vs CPU {err_cpu:.1e} (Inductor vs CPU {err_ind:.1e})"
        check += "; tape " + ("bitwise = generated" if tape_same else "DIFFERS from generated")
        log(f"  first call: neuron compiled {t_nc:.2f} s, Inductor {t_ind:.2f} s; {check}")
        n = block + 2
        sides = [(kept(lambda: neuron_c(*dev_args), n), True), (kept(lambda: fn(*dev_args), n), True),
                 (kept(lambda: fn(*cpu_args), n), False), (kept(lambda: inductor(*cpu_args), n), False),
                 (kept(lambda: tape(*dev_args), n), True)]
        runs = codegen_counters()["runs"]
        results = rotating_blocks(sides, samples, block)
        if made["kernels"] + made["cache_hits"] and codegen_counters()["runs"] == runs:
            check += "; generated code did NOT run"
    med = dict(zip(["neuron compiled", "neuron eager", "CPU eager", "Inductor", "neuron tape"],
                   (r[0] for r in results)))
    for k, v in med.items():
        log(f"  {k}: {ms(v)} ms")
    return {"name": name, "med": med, "check": check}


def kernel_cases(samples, block):
    g = torch.Generator().manual_seed(0)
    out = [kernel_case("8-op pointwise chain, float32, 2048x2048 (4M)", chain,
                       lambda: [torch.randn(2048, 2048, generator=g)], True, samples, block)]
    out.append(kernel_case("layer norm + GELU, float32, 4096x1024", ln_gelu,
                           lambda: [torch.randn(4096, 1024, generator=g), 1 + 0.1 * torch.randn(1024, generator=g),
                                    0.1 * torch.randn(1024, generator=g)], False, samples, block))
    return out


def chain_cpu_case(rounds=15, calls=5):
    x = torch.randn(2048, 2048, generator=torch.Generator().manual_seed(0))
    dx = x.to("neuron")
    gen = torch.compile(chain, backend="neuron")
    ind = torch.compile(chain, backend="inductor")
    with torch.no_grad():
        gen(dx)
        torch.neuron.synchronize()
        wait_for_kernels()
        tape = tape_compiled(chain, [dx])
        ind(x)
        same = torch.equal(gen(dx).cpu(), tape(dx).cpu())
        sides = {"neuron compiled (generated code)": lambda: gen(dx), "neuron compiled (tape)": lambda: tape(dx),
                 "Inductor (CPU)": lambda: ind(x)}
        res = {k: [] for k in sides}
        keep = []
        runs = codegen_counters()["runs"]
        for _ in range(rounds):
            for k, f in sides.items():
                t0 = time.process_time()
                for _ in range(calls):
                    keep.append(f())
                torch.neuron.synchronize()
                res[k].append((time.process_time() - t0) / calls)
                keep.clear()
        ran = codegen_counters()["runs"] > runs
    print(f"\n(d) 8-op chain on 2048x2048 float32, CPU ms per call ({rounds} rounds of {calls} calls; "
          f"neuron kernel threads {os.environ.get('TORCHNEURON_NUM_THREADS', 'default')}, "
          f"PyTorch threads {torch.get_num_threads()}; neuron ISA level {torch.neuron.isa_levels()['active']}; "
          f"generated = tape bitwise: {same}; generated code ran: {ran})\n")
    print("| side | best | median |")
    print("|---|---:|---:|")
    for k, v in res.items():
        print(f"| {k} | {min(v) * 1e3:.2f} | {statistics.median(v) * 1e3:.2f} |")


# ------------------------------------------------------------------ (c) host cost

def fifty(x):
    for _ in range(25):
        x = x * 1.0001
        x = x + 0.0001
    return x


def per_call(fn, calls, repeats, device):
    """Median seconds per call of `calls` back-to-back calls, synchronised
    at the end, over `repeats` repetitions (after one untimed round)."""
    times = []
    for r in range(repeats + 1):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        if r:
            times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def host_case(quick):
    log("host cost of a 50-node compiled graph:")
    calls = 300 if quick else 2000
    repeats = 3 if quick else 7
    x = torch.randn(16, device="neuron")
    xc = x.cpu()
    compiled_fifty = torch.compile(fifty, backend="neuron")
    inductor_fifty = torch.compile(fifty, backend="inductor")
    with torch.no_grad():
        got = compiled_fifty(x)
        assert torch.equal(got.cpu(), fifty(x).cpu()), "compiled 50-node graph differs from eager"
        inductor_fifty(xc)
        metrics.clear_all()
        t_graph = per_call(kept(lambda: compiled_fifty(x), calls), calls, repeats, "neuron")
        launches = metrics.get_counter_value("compile.launches") / ((repeats + 1) * calls)
        t_add = per_call(kept(lambda: x + 1, calls), calls, repeats, "neuron")
        t_eager50 = per_call(kept(lambda: fifty(x), calls), max(1, calls // 10), repeats, "neuron")
        t_ind = per_call(kept(lambda: inductor_fifty(xc), calls), calls, repeats, "cpu")
        t_cpu50 = per_call(kept(lambda: fifty(xc), calls), max(1, calls // 10), repeats, "cpu")
    r = metrics.get_compilation_metrics()
    info = f"{launches:.2f} launches per call" + (f", {r[-1]['segments']} segments" if r else "")
    rows_ = [("neuron compiled, 50-node graph (one call)", t_graph),
             ("neuron eager, one tiny add (one launch)", t_add),
             ("neuron eager, the same 50 ops", t_eager50),
             ("Inductor (CPU), the same 50-node graph", t_ind),
             ("CPU eager, the same 50 ops", t_cpu50)]
    for what, t in rows_:
        log(f"  {what}: {t * 1e6:.1f} us")
    return {"rows": rows_, "info": info, "calls": calls, "repeats": repeats}


# ------------------------------------------------------------------ report

def main():
    torchneuron.set_fallback_mode("silent")
    warnings.simplefilter("ignore")
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    header = host_line()
    log(header)
    samples = args.samples or (3 if args.quick else 7)
    block = 1 if args.quick else 2
    parts = args.case or ["gpt", "kernels", "host"]
    if parts == ["chain-cpu"]:
        chain_cpu_case()
        return
    start = time.perf_counter()
    warm_backends()
    gpt_rows, kernel_rows, host = [], [], None
    if "gpt" in parts:
        for size in args.gpt or ["demo", "wide"]:
            gpt_rows.append(gpt_case(size, samples, block))
            torch.neuron.empty_cache()
    if "kernels" in parts:
        kernel_rows = kernel_cases(samples, block)
    if "host" in parts:
        host = host_case(args.quick)
    if "chain-cpu" in parts:
        chain_cpu_case()

    print(f"\n{header}")
    load = os.getloadavg()[0]
    print(f"medians of {samples} blocks of {block} calls per side, the sides taking turns; "
          f"total run {time.perf_counter() - start:.0f} s, load average {load:.1f} at the end. Ratios "
          "are time ratios from this run (below 1: neuron compiled is faster).\n")
    if load > (os.cpu_count() or 1) - 0.5:
        print("note: other processes kept the cores busy during the run; PyTorch's OpenMP threads\n"
              "wait on descheduled peers then (CPU eager and Inductor steps several times slower),\n"
              "so the CPU-side figures and the ratios to them are unreliable: rerun on a quiet host\n"
              "or compare with --cpu-threads 1\n")
    if gpt_rows:
        print("(a) GPT training step (forward, backward, fused AdamW), ms/step\n")
        print("| model | neuron compiled | neuron eager | CPU eager | Inductor (CPU) | compiled / Inductor "
              "| compiled / neuron eager | compiled tokens/s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in gpt_rows:
            m = r["med"]
            print(f"| {r['name']} | {ms(m['neuron compiled'])} | {ms(m['neuron eager'])} | {ms(m['CPU eager'])} "
                  f"| {ms(m['Inductor'])} | {m['neuron compiled'] / m['Inductor']:.2f} "
                  f"| {m['neuron compiled'] / m['neuron eager']:.2f} | {r['tokens'] / m['neuron compiled']:,.0f} |")
        print("\nFirst step, compilation included (wall seconds)\n")
        print("| model | neuron compiled | Inductor (CPU) | aot_eager (CPU) | neuron eager | CPU eager "
              "| compiled / Inductor | compiled / aot_eager | first-step losses, max diff vs CPU |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in gpt_rows:
            f = r["first"]
            print(f"| {r['name']} | {f['neuron compiled']:.2f} | {f['Inductor']:.2f} | {f['aot_eager']:.2f} "
                  f"| {f['neuron eager']:.2f} | {f['CPU eager']:.2f} | {f['neuron compiled'] / f['Inductor']:.2f} "
                  f"| {f['neuron compiled'] / f['aot_eager']:.2f} | {r['worst_loss']:.1e} |")
        print()
        for r in gpt_rows:
            c = r["counters"]
            print(f"- {r['name']}: {r['compile_info']}; over the timed steps {c['compile.launches']} launches, "
                  f"{c['compile.eager_nodes']} eager nodes, {c['compile.graphs']} new graphs")
    if kernel_rows:
        print("\n(b) Pointwise chain and layer-norm + GELU (inference), ms per call\n")
        print("| case | neuron compiled | neuron tape | neuron eager | CPU eager | Inductor (CPU) "
              "| compiled / Inductor | tape / Inductor | compiled / neuron eager | check |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in kernel_rows:
            m = r["med"]
            print(f"| {r['name']} | {ms(m['neuron compiled'])} | {ms(m['neuron tape'])} | {ms(m['neuron eager'])} "
                  f"| {ms(m['CPU eager'])} | {ms(m['Inductor'])} | {m['neuron compiled'] / m['Inductor']:.2f} "
                  f"| {m['neuron tape'] / m['Inductor']:.2f} "
                  f"| {m['neuron compiled'] / m['neuron eager']:.2f} | {r['check']} |")
    if host:
        rows_ = host["rows"]
        t_graph, t_add = rows_[0][1], rows_[1][1]
        print(f"\n(c) Host cost per call, tensors of 16 elements ({host['calls']} calls synchronised at "
              f"the end, median of {host['repeats']}; {host['info']})\n")
        print("| what | us per call | / one eager launch |")
        print("|---|---:|---:|")
        for what, t in rows_:
            print(f"| {what} | {t * 1e6:.1f} | {t / t_add:.2f} |")
        print(f"\nper node of the compiled graph: {t_graph / 50 * 1e6:.2f} us; compiled call / eager launch "
              f"{t_graph / t_add:.2f}")


if __name__ == "__main__":
    try:
        first_step_main() if args.first_step else main()
    finally:
        shutil.rmtree(_TMP, ignore_errors=True)
