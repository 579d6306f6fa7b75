"""VIZ (issue 20, spec/backends.md DEV.VIZ, spec/conformance.md CONF.VIZ): the capture of every graph_rewrite with the
clause of each step, its bundle, the explorer served on 127.0.0.1 and opened in a real headless browser (Debian's
chromium), and the conformance suite's --viz-dir."""
from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import pytest

from refimpl import Tensor
from refimpl.helpers import KnobError, parse
from refimpl.uop import UOp, capture, graph_rewrite
from refimpl.uop.symbolic import symbolic
from refimpl.viz.bundle import bundle, spec_clauses
from refimpl.viz.server import serve_in_thread

ROOT = Path(__file__).resolve().parent.parent
CLAUSES = spec_clauses()
# the seeds' walkthrough (seed 001, project 5, task 2): VIZ=1 on a matmul, find the elementwise, reduce and loop nodes
MATMUL = """
from refimpl import Tensor
a = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
b = Tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
print((a @ b).relu().tolist())
"""


@pytest.fixture
def recorder():
  previous = capture.recorder
  rec = capture.start()
  yield rec
  capture.stop()
  capture.recorder = previous


def _run(code: str, env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
  script = tmp_path / "prog.py"
  script.write_text(code)
  full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
  return subprocess.run([sys.executable, str(script)], env=full, capture_output=True, text=True, timeout=120)


def _bundle_of(code: str, tmp_path: Path) -> tuple[Path, dict]:
  out = tmp_path / "viz"
  proc = _run(code, {"VIZ": str(out)}, tmp_path)
  assert proc.returncode == 0, proc.stderr
  files = list(out.glob("*.viz.json"))
  assert len(files) == 1 and str(files[0]) in proc.stderr   # DEV.VIZ.serve: the path is printed
  return out, json.loads(files[0].read_text())


# ---- capture (DEV.VIZ.capture, DEV.VIZ.replay, DEV.VIZ.off, DEV.VIZ.cap)

def test_off_by_default_and_nothing_is_wrapped(monkeypatch):
  """DEV.VIZ.off: without a recorder graph_rewrite never builds a record nor wraps the rules."""
  assert capture.recorder is None
  monkeypatch.setattr(capture.RewriteRecord, "wrap", lambda *a: pytest.fail("recorded while VIZ is off"))
  x = UOp.variable("x", 0, 10)
  assert graph_rewrite((x + 0) * 1, symbolic) is x


def test_each_step_has_its_clause_and_graph(recorder):
  """DEV.VIZ.capture: each rule application is recorded with the clause of the rule, in order; DEV.VIZ.replay: each
  step's graph is the input with the steps so far applied, and the last one is the rewrite's output."""
  x = UOp.variable("x", 0, 10)
  out = graph_rewrite(((x + 0) * 1).sink(), symbolic, name="test")
  (group,) = recorder.groups
  assert group.kind == "other"
  (rec,) = group.rewrites
  assert [s["clause"] for s in rec["steps"]] == ["RW.SYM.add-zero", "RW.SYM.mul-one"]
  assert all(s["clause"] in CLAUSES for s in rec["steps"])
  nodes = rec["nodes"]
  assert nodes[rec["input"]][0] == "SINK" and nodes[nodes[rec["input"]][3][0]][0] == "MUL"
  after_first = nodes[rec["steps"][0]["root"]]          # SINK(x * 1): the ADD is gone
  assert nodes[after_first[3][0]][0] == "MUL" and nodes[nodes[after_first[3][0]][3][0]][0] == "DEFINE_VAR"
  assert rec["steps"][-1]["root"] == rec["output"]
  assert nodes[rec["output"]][3] == [nodes.index(["DEFINE_VAR", "int", "('x', 0, 10)", []])]
  assert out is x.sink()


def test_replay_ends_at_every_kernels_output(recorder):
  """DEV.VIZ.replay over the whole pipeline of a conv2d with padding (lowering, symbolic rules, linearizer): every
  recorded rewrite's last step is its output; kernels carry their AST, linear program and source."""
  x = Tensor(np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5))
  w = Tensor(np.ones((4, 3, 3, 3), np.float32))
  x.conv2d(w, padding=1).relu().sum(axis=1).numpy()
  kernels = [g for g in recorder.groups if g.kind == "kernel"]
  assert [g.kind for g in recorder.groups][0] == "schedule" and kernels
  for g in kernels:
    assert "ast" in g.graphs and g.texts["program"] and "void " in g.texts["source"]
    assert [r["name"] for r in g.rewrites][-1] == "reduce_to_register"
    for r in g.rewrites:
      assert r["output"] is not None and (not r["steps"] or r["steps"][-1]["root"] == r["output"])
  assert sum(len(r["steps"]) for g in kernels for r in g.rewrites) > 10


def test_incremental_replay_is_the_replay_from_scratch(recorder, monkeypatch):
  """DEV.VIZ.replay: the replay that keeps node forms between steps gives, at every step, the very graph a replay from
  scratch of the steps so far gives (a matmul tile with options on CPU and a padded conv2d: about 200 steps)."""
  seen = []
  finish = capture.RewriteRecord.finish
  monkeypatch.setattr(capture.RewriteRecord, "finish", lambda self, out, error=None: (
    seen.append((self.sink, list(self.steps), out)), finish(self, out, error))[1])
  a, b = Tensor(np.ones((64, 48), np.float32), device="CPU"), Tensor(np.ones((48, 40), np.float32), device="CPU")
  ((a @ b).relu().sum(1) + 1).realize()
  Tensor(np.ones((2, 3, 9, 9), np.float32)).conv2d(Tensor(np.ones((4, 3, 3, 3), np.float32)), padding=1).realize()
  checked = 0
  for sink, steps, out in seen:
    kept = capture.Replay(sink)
    for k, (matched, result, _) in enumerate(steps):
      got = kept.step(matched, result)
      fresh = capture.Replay(sink)
      fresh.replaced = {m: r for m, r, _ in steps[:k + 1]}
      assert got is fresh.replay()
      checked += 1
    assert not steps or got is out
  assert checked > 150


def test_a_kernel_is_recorded_once_per_recorder(recorder):
  """A kernel compiled before the recorder started is compiled again once for it (so a conformance example's kernels
  are all in its bundle), and not again after that."""
  a = Tensor([1.0, 2.0, 3.0])
  (a * 3 + 1).numpy()
  capture.start()
  (a * 3 + 1).numpy()
  (a * 3 + 1).numpy()
  assert [g.kind for g in capture.recorder.groups].count("kernel") == 1


def test_capture_is_cut_at_its_caps():
  """DEV.VIZ.cap: past max_steps per rewrite, or max_bytes per recorder, records are counted, not kept, and the bundle
  says what was cut."""
  previous = capture.recorder
  try:
    rec = capture.start(max_steps=1)
    x = UOp.variable("x", 0, 10)
    graph_rewrite((((x + 0) * 1) - 0).sink(), symbolic)
    assert len(rec.groups[0].rewrites[0]["steps"]) == 1 and rec.groups[0].rewrites[0]["cut"] == 2
    assert any("2 rule applications beyond 1" in n for n in bundle(rec.to_json())["notes"])
    rec = capture.start(max_bytes=1)
    graph_rewrite(((x + 0) * 1).sink(), symbolic)
    graph_rewrite(((x * 1) + 0).sink(), symbolic)
    assert len(rec.groups[0].rewrites) == 1 and rec.cut == 1
    (Tensor([1.0, 2.0]) * 5).numpy()   # a schedule and a kernel: neither group nor graph is kept once full
    assert len(rec.groups) == 1 and rec.cut > 2
    assert any(f"{rec.cut} graph_rewrites, graphs or groups after" in n for n in bundle(rec.to_json())["notes"])
  finally:
    capture.stop()
    capture.recorder = previous


def test_knob():
  """DEV.KNOBS / DEV.VIZ: VIZ is 0, 1 or a directory; other numbers and files are refused."""
  assert parse("VIZ", "1") == 1 and parse("VIZ", "") == 0 and parse("VIZ", "out/viz") == "out/viz"
  with pytest.raises(KnobError, match="VIZ must be 0, 1 or a directory, got '2'"): parse("VIZ", "2")
  with pytest.raises(KnobError, match="must be 0, 1 or a directory, got file"): parse("VIZ", __file__)


# ---- bundles and the server (DEV.VIZ.bundle, DEV.VIZ.serve)

def test_bundle_of_the_seed_walkthrough(tmp_path):
  """DEV.VIZ.bundle: `VIZ=DIR python prog.py` on the seeds' matmul writes one bundle: a schedule and its kernels,
  each step's clause with its prose from spec/, and the elementwise, reduce and loop nodes of the matmul kernel."""
  _, b = _bundle_of(MATMUL, tmp_path)
  kinds = [g["kind"] for g in b["groups"]]
  assert kinds[0] == "schedule" and "kernel" in kinds
  (mm,) = [g for g in b["groups"] if g["kind"] == "kernel" and g["name"].startswith("r_")]
  seen = set()
  for v in mm["views"]:
    graphs = [v["graph"]] if v["kind"] == "graph" else [v["rewrite"]] if v["kind"] == "rewrite" else []
    seen |= {b["op_kinds"][n[0]] for g in graphs for n in g["nodes"]}
  assert {"elementwise", "reduce", "loop"} <= seen
  stages = [v["stage"] for v in mm["views"]]
  assert stages.index("lowering") < stages.index("symbolic") < stages.index("linearize") < stages.index("render")
  cited = {s["clause"] for v in mm["views"] if v["kind"] == "rewrite" for s in v["rewrite"]["steps"]}
  assert cited and all(b["clauses"][c]["text"].count(c) for c in cited)
  assert "for (int32_t ridx0" in next(v["text"] for v in mm["views"] if v["title"] == "source")


def test_viz_1_without_a_terminal_writes_the_bundle(tmp_path):
  """DEV.VIZ.serve: `VIZ=1` whose output is not a terminal (a test, CI) does not block: it writes the bundle to a new
  temporary directory and prints where it is and how to serve it."""
  proc = _run(MATMUL, {"VIZ": "1", "TMPDIR": str(tmp_path)}, tmp_path)
  assert proc.returncode == 0 and "[[7.0, 8.0], [16.0, 17.0]]" in proc.stdout
  (path,) = tmp_path.glob("tinyspec-viz-*/prog-*.viz.json")
  assert f"VIZ: bundle written to {path}; serve it with: python -m refimpl.viz {path.parent}" in proc.stderr
  assert json.loads(path.read_text())["format"] == "tinyspec-viz 1"


def test_viz_1_on_a_terminal_serves_and_prints_the_url(tmp_path):
  """DEV.VIZ.serve: `VIZ=1 python prog.py` in a terminal serves the explorer on 127.0.0.1 at the end of the run and
  prints its URL; the page and the run's bundle are there."""
  script = tmp_path / "prog.py"
  script.write_text(MATMUL)
  pid, fd = pty.fork()
  if pid == 0:   # the child: the program, on the pty's terminal
    os.execve(sys.executable, [sys.executable, str(script)],
              {**os.environ, "PYTHONPATH": str(ROOT), "VIZ": "1", "TMPDIR": str(tmp_path)})
  out, deadline = b"", time.time() + 120
  try:
    while b"(Ctrl-C to stop)" not in out and time.time() < deadline:
      if select.select([fd], [], [], 1)[0]:
        try: out += os.read(fd, 4096)
        except OSError: break
    url = re.search(rb"VIZ: explorer at (http://127\.0\.0\.1:\d+/)", out)
    assert url, out.decode(errors="replace")
    names = json.loads(urllib.request.urlopen(url.group(1).decode() + "api/bundles", timeout=10).read())
    assert len(names) == 1 and names[0].startswith("prog-")
    page = urllib.request.urlopen(url.group(1).decode(), timeout=10).read().decode()
    assert "/static/viz.js" in page and "http" not in page.replace("http-equiv", "")   # offline: nothing external
  finally:
    os.kill(pid, signal.SIGINT)
    os.waitpid(pid, 0)
    os.close(fd)


# ---- the explorer in a real browser (issue 20, "Must show")

def _png_pixels(data: bytes) -> np.ndarray:
  """The RGB(A) pixels of an 8-bit PNG (chromium's screenshots), decoded with zlib and the PNG row filters."""
  assert data[:8] == b"\x89PNG\r\n\x1a\n"
  pos, idat, (w, h, depth, colour) = 8, b"", (0, 0, 0, 0)
  while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR": w, h, depth, colour = struct.unpack(">IIBB", body[:10])
    if kind == b"IDAT": idat += body
    pos += 12 + n
  assert depth == 8 and colour in (2, 6)
  bpp = 3 if colour == 2 else 4
  raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * bpp)
  out = np.zeros((h, w * bpp), np.int64)
  prev = np.zeros(w * bpp, np.int64)
  for y in range(h):
    f, row = raw[y, 0], raw[y, 1:].astype(np.int64)
    if f == 0: cur = row
    elif f == 1: cur = np.cumsum(row.reshape(w, bpp), axis=0).reshape(-1) & 255
    elif f == 2: cur = (row + prev) & 255
    else:   # average and Paeth depend on the pixel just decoded: one byte at a time
      cur, r, p = [0] * (w * bpp), row.tolist(), prev.tolist()
      for i in range(w * bpp):
        a = cur[i - bpp] if i >= bpp else 0
        if f == 3: cur[i] = (r[i] + (a + p[i]) // 2) & 255
        else:
          c = p[i - bpp] if i >= bpp else 0
          pa, pb, pc = abs(p[i] - c), abs(a - c), abs(a + p[i] - 2 * c)
          cur[i] = (r[i] + (a if pa <= pb and pa <= pc else p[i] if pb <= pc else c)) & 255
      cur = np.array(cur, np.int64)
    out[y], prev = cur, cur
  return out.reshape(h, w, bpp)[:, :, :3]


def _chromium(*args: str) -> str:
  cmd = [shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--virtual-time-budget=8000", *args]
  return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="DEV.VIZ.explorer: the program chromium is missing (apt-get install -y chromium "
                           "chromium-driver, as .ci/run does)")
def test_explorer_in_a_headless_browser(tmp_path):
  """DEV.VIZ.explorer: the seeds' matmul under VIZ, its bundle served, the page opened in headless chromium: step
  through the symbolic rewrites of the matmul kernel (the URL fragment selects kernel and step, as the page's
  buttons do), each step names a clause that exists in spec/ and highlights the nodes it changed; the elementwise,
  reduce and loop nodes are drawn in their colours; a screenshot of a step is not blank."""
  out, b = _bundle_of(MATMUL, tmp_path)
  g = next(i for i, grp in enumerate(b["groups"]) if grp["kind"] == "kernel" and grp["name"].startswith("r_"))
  v = next(i for i, view in enumerate(b["groups"][g]["views"]) if view["title"] == "symbolic: lower")
  n = len(b["groups"][g]["views"][v]["rewrite"]["steps"])
  assert n >= 2
  server, url = serve_in_thread(out)
  try:
    base = f"{url}#b={next(out.glob('*.viz.json')).name}&g={g}&v={v}"
    dom0 = _chromium("--dump-dom", base + "&s=0")
    assert f'data-step="0">step 0 / {n}<' in dom0 and 'class="node n-loop' in dom0   # RANGE, SPECIAL
    assert 'class="node n-elementwise' in dom0 and 'class="node n-memory' in dom0
    for k in (1, 2, n):
      dom = _chromium("--dump-dom", f"{base}&s={k}")
      assert f'data-step="{k}">step {k} / {n}<' in dom
      clause = re.search(r'id="clause" data-clause="([^"]+)"', dom).group(1)
      assert clause in CLAUSES, clause
      assert f'<code class="clause-id">{clause}</code>' in dom and CLAUSES[clause]["file"] in dom
      assert int(re.search(r'data-changed="(\d+)"', dom).group(1)) >= 1 and 'class="node n-' in dom
    ast = _chromium("--dump-dom", f"{url}#b={next(out.glob('*.viz.json')).name}&g={g}&v=0")
    assert 'class="node n-reduce' in ast and 'data-op="REDUCE_AXIS"' in ast and 'data-op="MUL"' in ast
    shot = tmp_path / "step.png"
    _chromium("--window-size=1000,700", f"--screenshot={shot}", base + "&s=1")
    pixels = _png_pixels(shot.read_bytes())
    assert pixels.shape == (700, 1000, 3)
    colours = np.unique(pixels.reshape(-1, 3) // 16, axis=0)   # drawn nodes, text, header, legend: many colours
    inked = (pixels.sum(axis=2) < 600).mean()                  # not near-white
    assert len(colours) > 20 and inked > 0.05, (len(colours), inked)
  finally:
    server.shutdown()


# ---- the conformance suite's option (CONF.VIZ)

def test_conformance_viz_dir_writes_a_bundle_per_failure(tmp_path):
  """CONF.VIZ: with --viz-dir, a failing hypothesis test's failure names a bundle holding refimpl's rewrites of the
  falsifying example only (the shrunk n=1: one kernel of one element), and a passing test writes none."""
  (tmp_path / "test_it.py").write_text(
    "from hypothesis import given, strategies as st\nfrom refimpl import Tensor\n\n"
    "@given(st.integers(2, 9))\ndef test_fails(n):\n  assert (Tensor.arange(n) * 2).sum().item() < 0\n\n"
    "def test_passes():\n  assert (Tensor([1, 2]) + 1).tolist() == [2, 3]\n")
  env = {**os.environ, "PYTHONPATH": str(ROOT)}
  env.pop("VIZ", None)
  proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "conformance.conftest", "-p", "no:cacheprovider",
                         "test_it.py", "--viz-dir", "bundles", "-q"], cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=300)
  assert "1 failed, 1 passed" in proc.stdout, proc.stdout[-3000:]
  (path,) = (tmp_path / "bundles").glob("*.viz.json")
  assert "test_fails" in path.name and "CONF.VIZ: refimpl's rewrites of this example" in proc.stdout
  assert str(path.relative_to(tmp_path)) in proc.stdout and "python -m refimpl.viz bundles" in proc.stdout
  b = json.loads(path.read_text())
  schedules = [g for g in b["groups"] if g["kind"] == "schedule"]
  assert schedules and all(g["name"] == "schedule 1" or g["name"].startswith("schedule ") for g in schedules)
  sizes = {json.dumps(v["graph"]["nodes"]) for g in schedules for v in g["views"] if v["title"] == "tensor graph"}
  assert any("(2,)" in s for s in sizes) and not any("(3,)" in s for s in sizes)   # only the shrunk n=2 example
