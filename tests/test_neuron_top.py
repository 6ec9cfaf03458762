"""neuron-top: a training process shows in `neuron-top --once --json` with
its numbers moving, its page is 0600 in a 0700 directory, a process killed
with SIGKILL disappears (its page removed by the reader), a clean exit
removes the page, damaged or foreign pages are skipped with a note and
never crash the reader, and the live view under tmux shows the numbers
moving.

Each test publishes into a directory of its own (TORCHNEURON_TOP_DIR), so
processes of other test runs on the machine do not show."""

import glob
import json
import os
import random
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time
import tomllib

import pytest

from conftest import _child_env, check_output, run_python
from torchneuron.tools import neuron_top, top_page

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A small training loop with one CPU fallback per step; prints "ready"
# after its first step and stops by itself after a minute at most.
TRAINER = """
import time, torch, torchneuron
lib = torch.library.Library("tn_top_test", "DEF")
lib.define("twice(Tensor x) -> Tensor")
lib.impl("twice", lambda x: x * 2, "CPU")
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64, device="neuron")
deadline = time.time() + 60
step = 0
while time.time() < deadline:
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch.ops.tn_top_test.twice(x)
    torch.neuron.synchronize()
    if step == 0:
        print("ready", flush=True)
    step += 1
"""


def _env(top_dir, **more):
    env = _child_env({"TORCHNEURON_TOP_DIR": str(top_dir), "TORCHNEURON_FALLBACK": "silent",
                      "PYTHONPATH": REPO, **more})
    return env


@pytest.fixture(scope="module")
def top_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("top") / "pages"  # made by the runtime, 0700


# One trainer for the module (its start-up is most of these tests' time):
# the JSON and tmux tests watch it, then the last test kills it.
@pytest.fixture(scope="module")
def trainer(top_dir):
    proc = subprocess.Popen([sys.executable, "-c", TRAINER], env=_env(top_dir),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "ready", proc.stderr.read()
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _page_of(top_dir, pid):
    pages = glob.glob(os.path.join(top_dir, f"{pid}-*.page"))
    return pages[0] if pages else None


def _wait_for(predicate, seconds=10.0):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_once_json_shows_the_trainer_with_its_numbers_moving(trainer, top_dir, capsys):
    assert _wait_for(lambda: _page_of(top_dir, trainer.pid))
    page = _page_of(top_dir, trainer.pid)
    assert stat.S_IMODE(os.stat(page).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(top_dir).st_mode) == 0o700
    assert os.stat(page).st_uid == os.getuid()

    # As a script runs it: the console script's module in a fresh interpreter.
    out = subprocess.run([sys.executable, "-m", "torchneuron.tools.neuron_top", "--once", "--json",
                          "--interval", "0.3", "--dir", str(top_dir)],
                         env=_env(top_dir), capture_output=True, text=True, timeout=120)
    first = json.loads(check_output(out))
    assert neuron_top.main(["--once", "--json", "--interval", "0.3", "--dir", str(top_dir)]) == 0
    second = json.loads(capsys.readouterr().out)

    for snap in (first, second):
        assert snap["version"] == 1 and snap["notes"] == []
        (proc,) = snap["processes"]
        assert proc["pid"] == trainer.pid and "python" in proc["command"]
        assert proc["target"] == "trn2"
        assert proc["fallbacks_per_s"] > 0
        dev = proc["devices"][0]
        assert dev["name"] == "neuron:0" and [d["name"] for d in proc["devices"]] == ["neuron:0"]
        assert 0 < dev["allocated_bytes"] <= dev["reserved_bytes"] < dev["capacity_bytes"]
        assert dev["ops_per_s"] > 0 and 0 < dev["busy"]
        assert 0 < dev["fallbacks"] <= proc["fallbacks"] and dev["fallbacks_per_s"] > 0
        assert dev["streams_in_use"] >= 1 and dev["streams"][0]["id"] == 0
        stream = dev["streams"][0]
        assert stream["ops_per_s"] > 0 and 0 < stream["busy"] <= 1
        assert stream["submitted"] >= stream["ops"] > 0 and stream["queued"] >= 0
    p1, p2 = first["processes"][0], second["processes"][0]
    assert p2["devices"][0]["ops"] > p1["devices"][0]["ops"]
    assert p2["fallbacks"] > p1["fallbacks"]
    assert p2["devices"][0]["streams"][0]["submitted"] > p1["devices"][0]["streams"][0]["submitted"]

    text = neuron_top.render(second)
    assert any(line.split()[:2] == [str(trainer.pid), "neuron:0"] for line in text), text


def test_a_clean_exit_removes_the_page(tmp_path):
    # (TORCHNEURON_TOP=0 and a bad value are runtime/tests/test_top.c's.)
    top_dir = tmp_path / "pages"
    out = check_output(run_python("""
        import glob, os, time, torch
        torch.ones(4, device="neuron").add_(1).cpu()
        pages = os.path.join(os.environ["TORCHNEURON_TOP_DIR"], "*.page")
        for _ in range(500):  # named after the publisher's first publication
            if glob.glob(pages):
                break
            time.sleep(0.01)
        print(len(glob.glob(pages)))
    """, env={"TORCHNEURON_TOP_DIR": str(top_dir)}))
    assert out.split() == ["1"]
    assert os.listdir(top_dir) == []


# ---- untrusted pages ------------------------------------------------------

def _start_ticks_of_self():
    return top_page.start_ticks(os.getpid())


def _valid_page(pid=None, start=None, devices=2, pid_namespace=None):
    """A well-formed version-2 page of a (by default: this, live) process."""
    pid = os.getpid() if pid is None else pid
    start = _start_ticks_of_self() if start is None else start
    page_bytes = 112 + devices * top_page.DEVICE_BYTES
    data = bytearray(page_bytes)
    struct.pack_into("=8s8IQqQQ8sQQQQ", data, 0, top_page.MAGIC, 2, top_page.BYTE_ORDER, 112,
                     top_page.DEVICE_BYTES, 48, 16, devices, os.getuid(), page_bytes, pid, start,
                     100_000_000, b"trn2", pid_namespace or top_page.own_pid_namespace(), 4, 123_456_789, 7)
    for d in range(devices):
        offset = 112 + d * top_page.DEVICE_BYTES
        struct.pack_into("=7Q2I", data, offset, 1 << 20, 2 << 20, 1 << 34, 50, 1, 10**6, 3, 1, 1)
        struct.pack_into("=qqQQQQ", data, offset + 64, 0, 0, 1, 51, 50, 10**6)
    return bytes(data)


def test_parse_accepts_the_valid_page():
    page = top_page.parse(_valid_page())
    assert page.pid == os.getpid() and page.target == "trn2" and page.fallbacks == 7
    assert [d.streams[0].ops for d in page.devices] == [50, 50]
    assert [d.fallbacks for d in page.devices] == [3, 3]


def test_parse_rejects_every_truncation_and_random_damage_with_a_page_error():
    valid = _valid_page()
    for n in range(len(valid)):
        with pytest.raises(top_page.PageError):
            top_page.parse(valid[:n])
    rng = random.Random(17)
    for _ in range(3000):
        damaged = bytearray(valid)
        for _ in range(rng.randint(1, 8)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            top_page.parse(bytes(damaged))  # some damage leaves a page that holds together
        except top_page.PageError:
            pass
    for _ in range(500):
        noise = bytes(rng.randrange(256) for _ in range(rng.randint(0, 2 * len(valid))))
        with pytest.raises(top_page.PageError):
            top_page.parse(noise)


@pytest.mark.parametrize("field,value,reason", [
    (0, b"NRTTOQ\0\0", "bad magic"),
    (8, struct.pack("=I", 1), "layout version 1"),
    (12, struct.pack("=I", 0x04030201), "byte order"),
    (20, struct.pack("=I", 999), "record sizes"),
    (32, struct.pack("=I", 100000), "100000 devices"),
    (40, struct.pack("=Q", 12), "does not match"),
    (48, struct.pack("=q", -1), "pid -1"),
    (72, b"tr\x01n\0\0\0\0", "garbled target"),
    (88, struct.pack("=Q", 5), "being written"),
    (112 + 60, struct.pack("=I", 17), "lists 17"),
])
def test_parse_names_what_is_wrong(field, value, reason):
    data = bytearray(_valid_page())
    data[field:field + len(value)] = value
    with pytest.raises(top_page.PageError, match=reason):
        top_page.parse(bytes(data))


def _write(path, data, mode=0o600):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def test_scan_skips_damaged_and_foreign_pages_with_notes(tmp_path):
    d = tmp_path / "pages"
    d.mkdir(mode=0o700)
    me = f"{os.getpid()}-{_start_ticks_of_self()}.page"
    valid = _valid_page()
    rng = random.Random(5)
    cases = {
        "truncated": valid[:300],
        "random": bytes(rng.randrange(256) for _ in range(len(valid))),
        "empty": b"",
        "version": valid[:8] + struct.pack("=I", 9) + valid[12:],
    }
    expected = {}
    for reason, data in cases.items():
        sub = tmp_path / reason
        sub.mkdir(mode=0o700)
        _write(sub / me, data)
        pages, notes = top_page.scan(str(sub))
        assert pages == [] and len(notes) == 1 and notes[0].startswith(f"skipped {me}: "), notes
        expected[reason] = notes[0]
        assert (sub / me).exists()  # its process (this one) runs: skipped, not removed
    assert "truncated: 300 of" in expected["truncated"]
    assert "version 9" in expected["version"]

    loose = tmp_path / "loose"
    loose.mkdir(mode=0o700)
    _write(loose / me, valid, mode=0o644)
    assert top_page.scan(str(loose)) == ([], [f"skipped {me}: others may use it (mode 644)"])

    linked = tmp_path / "linked"
    linked.mkdir(mode=0o700)
    _write(tmp_path / "target", valid)
    os.symlink(tmp_path / "target", linked / me)
    pages, notes = top_page.scan(str(linked))
    assert pages == [] and "cannot open" in notes[0]

    fifo = tmp_path / "fifo"
    fifo.mkdir(mode=0o700)
    os.mkfifo(fifo / me, 0o600)
    assert top_page.scan(str(fifo)) == ([], [f"skipped {me}: not a regular file"])

    named = tmp_path / "named"
    named.mkdir(mode=0o700)
    _write(named / "notes.txt", b"hello")
    _write(named / f"1-{_start_ticks_of_self()}.page", valid)  # header says another pid
    pages, notes = top_page.scan(str(named))
    assert pages == [] and len(notes) == 2
    assert "not a page name" in notes[1] or "not a page name" in notes[0]

    if os.getuid() == 0:  # only root can give a file away
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o700)
        _write(foreign / me, valid)
        os.chown(foreign / me, 12345, -1)
        assert top_page.scan(str(foreign)) == ([], [f"skipped {me}: owned by uid 12345, not by you"])

    ok = tmp_path / "ok"
    ok.mkdir(mode=0o700)
    _write(ok / me, valid)
    pages, notes = top_page.scan(str(ok))
    assert [p.pid for p in pages] == [os.getpid()] and notes == []


def test_scan_removes_a_damaged_page_of_a_dead_process_and_refuses_an_open_directory(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    d = tmp_path / "pages"
    d.mkdir(mode=0o700)
    _write(d / f"{dead.pid}-1.page", b"garbage")
    pages, notes = top_page.scan(str(d))
    assert pages == [] and notes == [f"removed the unreadable page {dead.pid}-1.page of exited "
                                     f"process {dead.pid}"]
    assert os.listdir(d) == []
    os.chmod(d, 0o777)
    _write(d / f"{os.getpid()}-{_start_ticks_of_self()}.page", _valid_page())
    pages, notes = top_page.scan(str(d))
    assert pages == [] and "only you may use" in notes[0]
    assert top_page.scan(str(tmp_path / "missing")) == ([], [])


def test_scan_leaves_pages_of_another_pid_namespace_alone(tmp_path):
    """A container sharing the directory: its pids mean nothing here, so its
    pages (even one whose pid runs no process here) are skipped, never
    removed; a damaged page whose header still names the namespace too."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    d = tmp_path / "pages"
    d.mkdir(mode=0o700)
    other = top_page.own_pid_namespace() + 1
    page = _valid_page(pid=dead.pid, start=1, pid_namespace=other)
    _write(d / f"{dead.pid}-1.page", page)
    _write(d / f"{dead.pid}-2.page", page[:200])  # truncated, its header intact
    pages, notes = top_page.scan(str(d))
    assert pages == [] and notes == [f"skipped {dead.pid}-1.page: a process of another PID namespace",
                                     f"skipped {dead.pid}-2.page: a process of another PID namespace"]
    assert sorted(os.listdir(d)) == [f"{dead.pid}-1.page", f"{dead.pid}-2.page"]
    # The same page from this namespace is a dead process's: removed.
    _write(d / f"{dead.pid}-1.page", _valid_page(pid=dead.pid, start=1))
    pages, notes = top_page.scan(str(d))
    assert notes[0] == f"removed the page of exited process {dead.pid}"


def test_neuron_top_survives_garbage_in_its_directory(tmp_path, capsys):
    d = tmp_path / "pages"
    d.mkdir(mode=0o700)
    rng = random.Random(3)
    for i in range(20):
        _write(d / f"{os.getpid()}-{i}.page", bytes(rng.randrange(256) for _ in range(rng.randint(0, 9000))))
    assert neuron_top.main(["--once", "--json", "--interval", "0", "--dir", str(d)]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert snap["processes"] == [] and len(snap["notes"]) == 20
    assert neuron_top.main(["--once", "--interval", "0", "--dir", str(d)]) == 0
    assert "no process is using a neuron device" in capsys.readouterr().out


def test_console_script_is_declared():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["neuron-top"] == "torchneuron.tools.neuron_top:main"


# ---- the live view, under tmux -------------------------------------------

def _capture(server, target):
    return subprocess.run(["tmux", "-L", server, "capture-pane", "-p", "-t", target],
                          capture_output=True, text=True, check=True).stdout


def _ops_of(screen, pid):
    """The OPS column of the process's first device row, or None."""
    for line in screen.splitlines():
        words = line.split()
        if words[:2] == [str(pid), "neuron:0"] and len(words) > 10:
            # PID DEVICE allocated unit reserved unit OPS/S FALLBACKS/S QUEUE BUSY OPS
            return int(words[10])
    return None


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
def test_live_view_under_tmux_shows_the_numbers_moving(trainer, top_dir):
    server = f"tn-top-{os.getpid()}"
    tmux = ["tmux", "-L", server, "-f", "/dev/null"]
    subprocess.run(tmux + ["new-session", "-d", "-s", "t", "-x", "160", "-y", "40",
                           f"{sys.executable} -m torchneuron.tools.neuron_top --interval 0.5 "
                           f"--dir {top_dir}"], env=_env(top_dir), check=True)
    try:
        assert _wait_for(lambda: _ops_of(_capture(server, "t"), trainer.pid) is not None, 60), \
            _capture(server, "t")
        screen = _capture(server, "t")
        first = _ops_of(screen, trainer.pid)
        assert "neuron-top" in screen and "ALLOCATED" in screen
        assert _wait_for(lambda: (_ops_of(_capture(server, "t"), trainer.pid) or 0) > first, 10), \
            _capture(server, "t")
        subprocess.run(tmux + ["send-keys", "-t", "t", "q"], check=True)
        # q ends it, and the session with it. The process imports torch, whose
        # teardown on a host busy with the rest of the suite took over 10 s
        # once (a CI run): the bound is for a hang, not for speed.
        assert _wait_for(lambda: subprocess.run(tmux + ["has-session", "-t", "t"],
                                                capture_output=True).returncode != 0, 60)
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)


def test_a_killed_process_disappears_and_its_page_is_removed(trainer, top_dir):
    assert _wait_for(lambda: _page_of(top_dir, trainer.pid))
    page = _page_of(top_dir, trainer.pid)
    pages, notes = top_page.scan(str(top_dir))
    assert [p.pid for p in pages] == [trainer.pid] and notes == []
    trainer.send_signal(signal.SIGKILL)
    trainer.wait()
    assert os.path.exists(page)  # no exit handler ran
    snap = neuron_top.take(str(top_dir), 0)
    assert snap["processes"] == []
    assert snap["notes"] == [f"removed the page of exited process {trainer.pid}"]
    assert not os.path.exists(page)
