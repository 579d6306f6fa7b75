"""The scoreboard of merged conformance runs (CONF.REPORT.scoreboard, conformance/scoreboard.py): its cells, its
markdown, and its static HTML page rendered in a real headless browser (Debian's chromium, driven through its own
command line: --screenshot and --dump-dom), whose screenshot must show the table's colours and whose DOM must hold the
table and the links to the failures."""
from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from conformance.scoreboard import scoreboard_cells, scoreboard_html, scoreboard_markdown, write_scoreboard

IMPL = "conformance.adapters.refimpl:RefimplAdapter"
REPRO = "--- reproduction ---\nx = Tensor([-3], dtype='int32')\nprint(x.abs().numpy())   # want [3]"


def _row(op, dtype, prop, fraction=0.0, **counts):
  """A record of conformance.json: one passing test unless `counts` says otherwise."""
  c = {"pass": 1, "fail": 0, "xfail": 0, "skip": 0, **counts}
  failures = [{"test": f"conformance/tests/test_forward.py::test_forward[{op}-{dtype}]", "reproduction": REPRO}] \
    * c["fail"]
  return {"op": op, "dtype": dtype, "property": prop, **c, "examples": 6, "worst_ulps": None if c["fail"] else 1.0,
          "worst_fraction": None if c["fail"] else fraction, "histogram": {}, "clauses": [], "failures": failures}


def _report(backend, rows):
  return {"backend": backend, "impl": IMPL, "results": rows, "clauses": {}}


def two_runs():
  """A PYTHON run where abs/int32 fails, and a CPU run with an expected failure, a skip and a test without a
  catalogue entry (keyed by its id, as the plugin keys them)."""
  python = _report("PYTHON", [_row("abs", "int32", "forward", **{"pass": 0, "fail": 1}),
                              _row("abs", "float32", "forward", 0.0), _row("exp", "float32", "forward", 0.25),
                              _row("exp", "float32", "vjp", 0.9)])
  cpu = _report("CPU", [_row("abs", "int32", "forward"), _row("abs", "float32", "forward"),
                        {**_row("exp", "float32", "forward"), "pass": 0, "xfail": 1},
                        {**_row("exp", "float32", "vjp"), "pass": 0, "skip": 1},
                        _row("test_seed_cotangent[a]", "", "test_seed_cotangent"),
                        _row("test_seed_cotangent[b]", "", "test_seed_cotangent", 0.5)])
  return [python, cpu]


def test_cells_take_the_worst_verdict_and_fraction():
  from conformance.report import merge_runs
  cells = scoreboard_cells(merge_runs(two_runs()))
  assert cells[("abs", "int32", "forward", "PYTHON")]["fail"] == 1
  assert cells[("exp", "float32", "vjp", "PYTHON")]["worst_fraction"] == 0.9
  seed = cells[("test_seed_cotangent", "", "test", "CPU")]   # two test ids without a catalogue entry, one cell
  assert (seed["pass"], seed["worst_fraction"]) == (2, 0.5)
  assert ("exp", "float32", "vjp", "CPU") in cells and ("abs", "int32", "vjp", "PYTHON") not in cells


def test_markdown_table():
  from conformance.report import merge_runs
  md = scoreboard_markdown(merge_runs(two_runs()))
  header = next(line for line in md.splitlines() if line.startswith("| op |"))
  assert header == "| op | dtype | forward PYTHON | vjp PYTHON | forward CPU | test CPU | vjp CPU |"
  rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in md.splitlines() if line.startswith("| `")}
  assert rows[("`abs`", "int32")] == "| `abs` | int32 | [FAIL](#fail-1) |  | 0 |  |  |"
  assert rows[("`exp`", "float32")] == "| `exp` | float32 | 0.25 | 0.9 | xfail |  | skip |"
  assert rows[("`test_seed_cotangent`", "-")].endswith("| 0.5 |  |")
  failures = md.split("## Failures (1)")[1]
  assert '<a id="fail-1"></a>' in failures and "abs int32 forward on PYTHON" in failures and REPRO in failures


def test_page_is_static_and_links_its_failures():
  from conformance.report import merge_runs
  page = scoreboard_html(merge_runs(two_runs()))
  assert "<script" not in page and "http://" not in page and "https://" not in page and "<link" not in page
  assert 'class="fail" title="fail 1; worst/bound inf, worst ULPs inf"><a href="#fail-1">FAIL</a>' in page
  assert '<h3 id="fail-1">' in page and "x.abs().numpy()" in page.split('<h3 id="fail-1">')[1]
  assert 'class="p0"' in page and 'class="p9"' in page and 'class="xfail"' in page   # 0 exact, 0.9 near the bound


def test_write_scoreboard_from_run_directories(tmp_path):
  import json
  for name, report in zip(("py", "cpu"), two_runs()):
    (tmp_path / name).mkdir()
    (tmp_path / name / "conformance.json").write_text(json.dumps(report))
  paths = write_scoreboard([tmp_path / "py", tmp_path / "cpu"], tmp_path / "out")
  assert set(paths) == {"md", "html"} and all(p.exists() for p in paths.values())
  assert "- PYTHON: " + IMPL in paths["md"].read_text()
  with pytest.raises(ValueError, match="not a conformance report"):
    write_scoreboard([{"results": []}], tmp_path / "bad")


# ---------------------------------------------------------------------------------------------------- in a browser

def read_png(path: Path) -> np.ndarray:
  """An 8-bit RGB or RGBA PNG (what chromium's screenshots are) as an (height, width, channels) uint8 array: the
  IDAT chunks inflated with zlib, then each scanline's filter (none, sub, up, average, paeth) undone."""
  data = path.read_bytes()
  assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
  pos, idat, header = 8, b"", None
  while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    if kind == b"IHDR": header = struct.unpack(">IIBBBBB", data[pos + 8:pos + 8 + length])
    elif kind == b"IDAT": idat += data[pos + 8:pos + 8 + length]
    pos += 12 + length
  w, h, depth, color, _, _, interlace = header
  assert depth == 8 and color in (2, 6) and not interlace, f"unexpected PNG: depth {depth}, colour type {color}"
  bpp = 3 if color == 2 else 4
  raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * bpp)
  out, prev = np.zeros((h, w * bpp), np.int64), np.zeros(w * bpp, np.int64)
  for y in range(h):
    kind, row = raw[y, 0], raw[y, 1:].astype(np.int64)
    if kind == 1: row = np.cumsum(row.reshape(w, bpp), axis=0).reshape(-1) % 256
    elif kind == 2: row = (row + prev) % 256
    elif kind in (3, 4):
      for i in range(w * bpp):
        a, b = (row[i - bpp] if i >= bpp else 0), prev[i]
        if kind == 3: pred = (a + b) // 2
        else:
          c = prev[i - bpp] if i >= bpp else 0
          pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
          pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
        row[i] = (row[i] + pred) % 256
    out[y] = prev = row
  return out.reshape(h, w, bpp).astype(np.uint8)


class _Table(HTMLParser):
  """The rows of the table with id "scoreboard" in a DOM dump: each row's cell texts, and the failure links."""

  def __init__(self):
    super().__init__()
    self.depth, self.rows, self.links, self._cell = 0, [], [], None

  def handle_starttag(self, tag, attrs):
    attrs = dict(attrs)
    if tag == "table": self.depth += 1 if attrs.get("id") == "scoreboard" or self.depth else 0
    elif self.depth and tag == "tr": self.rows.append([])
    elif self.depth and tag in ("td", "th"): self._cell = ""
    elif self.depth and tag == "a": self.links.append(attrs.get("href"))

  def handle_endtag(self, tag):
    if tag == "table" and self.depth: self.depth -= 1
    elif self.depth and tag in ("td", "th") and self._cell is not None:
      self.rows[-1].append(self._cell.strip())
      self._cell = None

  def handle_data(self, data):
    if self._cell is not None: self._cell += data


BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(BROWSER is None, reason="CONF.REPORT.scoreboard: the page is rendered by chromium, which is not "
                    "installed (apt-get install chromium; .ci/run installs it)")
def test_page_renders_in_headless_chromium(tmp_path):
  """The page as a browser shows it: a screenshot that is not blank and shows the failing cell's red and the passing
  cells' green, and a DOM (after the browser parsed the page) holding the table with its rows and failure links."""
  from conformance.report import merge_runs
  page = tmp_path / "scoreboard.html"
  page.write_text(scoreboard_html(merge_runs(two_runs())))
  shot = tmp_path / "scoreboard.png"
  common = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}"]   # --no-sandbox: CI runs as root, where the sandbox refuses
  proc = subprocess.run([*common, "--window-size=1000,700", f"--screenshot={shot}", page.as_uri()],
                        capture_output=True, text=True, timeout=120)
  assert shot.exists(), proc.stderr[-2000:]
  pixels = read_png(shot)[..., :3].reshape(-1, 3).astype(int)
  assert pixels.shape[0] == 1000 * 700 and len(np.unique(pixels, axis=0)) > 50 and pixels.std() > 10   # not blank
  near = lambda rgb: np.sum(np.abs(pixels - rgb).sum(axis=1) <= 12)   # noqa: E731
  assert near((0xe5, 0x39, 0x35)) > 100   # td.fail's red, a cell's worth of pixels
  green = (pixels[:, 1] > pixels[:, 0] + 30) & (pixels[:, 1] > pixels[:, 2] + 30)
  assert green.sum() > 100   # the exact and near-exact passing cells
  dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
  table = _Table()
  table.feed(dom)
  assert table.rows[0][:2] == ["op", "dtype"] and table.rows[1] == ["forward", "vjp", "forward", "test", "vjp"]
  body = {tuple(r[:2]): r[2:] for r in table.rows[2:]}
  assert body[("abs", "int32")] == ["FAIL", "", "0", "", ""]
  assert body[("exp", "float32")] == ["0.25", "0.9", "xfail", "", "skip"]
  assert table.links == ["#fail-1"] and re.search(r'<h3 id="fail-1">', dom)
