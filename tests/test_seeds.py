"""The seed documents' examples run with `refimpl` in place of `tinygrad` (../shared/seeds, beside the checkout).

Each listed section's Python blocks run in order in one namespace. A block that is a printed UOp (it starts with
`UOp(`) is the output of the block before it: where refimpl's graphs are the same as the seed's, it is compared;
where the seed prints tinygrad's own tensor-level graph (a COPY from its host device, VIEWs), it is skipped.
Device names of other backends are read as PYTHON until those backends exist (issue 5/7)."""
import contextlib
import io
import re
from pathlib import Path

import pytest

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
needs_seeds = pytest.mark.skipif(not SEEDS.is_dir(), reason="seed documents are in ../shared/seeds beside the checkout")


def _section_blocks(prefix: str, name: str) -> list[str]:
  """The Python blocks of the section headed `name`, up to the next heading of the same or a higher level
  (lines inside code fences are code, not headings: `# comment` is not a heading)."""
  lines = next(SEEDS.glob(prefix + "*")).read_text().splitlines()
  fenced, start, level, body = False, None, 0, []
  for line in lines:
    if line.startswith("```"): fenced = not fenced
    heading = None if fenced else re.match(r"^(#+) (.*?)\s*$", line)
    if heading and start is not None and len(heading.group(1)) <= level: break
    if start is not None: body.append(line)
    if heading and heading.group(2) == name: start, level = True, len(heading.group(1))
  assert start, f"no section {name!r} in seed {prefix}"
  return re.findall(r"```python\n(.*?)```", "\n".join(body) + "\n", re.S)


def _run_blocks(blocks: list[str], ns: dict, compare: bool) -> int:
  """Run the blocks; returns how many printed-output blocks were compared."""
  printed, compared = "", 0
  for block in blocks:
    code = block.replace("tinygrad", "refimpl").replace('"CPU"', '"PYTHON"')
    if code.lstrip().startswith("UOp("):
      if compare:
        assert printed.strip().splitlines()[-len(code.strip().splitlines()):] == code.strip().splitlines()
        compared += 1
      continue
    out = io.StringIO()
    with contextlib.redirect_stdout(out): exec(compile(code, "<seed>", "exec"), ns)
    printed = out.getvalue()
  return compared


@needs_seeds
def test_seed_000_uop_and_pattern_sections_run_unchanged():
  ns: dict = {}
  blocks = _section_blocks("000_", "Low-Level UOP Construction") + \
    _section_blocks("000_", "Pattern Matching and Graph Rewriting")
  assert len(blocks) >= 4
  assert _run_blocks(blocks, ns, compare=True) == 1   # the printed form of `a + b` in "Low-Level UOP Construction"
  from refimpl.uop import UOp, Ops
  from refimpl.dtype import dtypes
  assert ns["a_plus_b_simplified"] is UOp(Ops.CONST, dtypes.int, arg=4)


TENSOR_SECTIONS = ["The Tensor", "The Devices", "Lazy Evaluation", "The UOP", "Realization",
                   "Operations build computation graphs", "Smart Deduplication",
                   "Graph Optimization and Kernel Generation"]


@needs_seeds
def test_seed_000_tensor_sections_run_on_python():
  from refimpl.device import Device
  default = Device.DEFAULT
  try:
    ns: dict = {}
    for section in TENSOR_SECTIONS: _run_blocks(_section_blocks("000_", section), ns, compare=False)
  finally:
    Device.DEFAULT = default
  assert ns["t_times_2"].tolist() == [2, 4, 6, 8] and ns["B"].tolist() == [4, 8, 12, 16]
  assert ns["A"].uop is ns["B"].uop
  store = ns["rewritten_ast"].src[0]
  assert store.src[1].src[1].arg == 7      # `t + 3 + 4` constant-folded to `+ 7` in the kernel


@needs_seeds
def test_seed_003_tensor_fragments_run_on_python():
  """Seed 003's examples are fragments without imports; those using only tensors run with Tensor and np given."""
  import numpy as np
  from refimpl import Tensor, dtypes
  text = next(SEEDS.glob("003_*")).read_text()
  other = re.compile(r"backward|grad|nn\.|optim|jit|class |def |torch|safe_|state_dict|Device\(|\.to\(|GPU|\.\.\.")
  blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "Tensor" in b and not other.search(b)]
  assert len(blocks) >= 3
  for b in blocks: _run_blocks([b], {"Tensor": Tensor, "dtypes": dtypes, "np": np}, compare=False)


@needs_seeds
def test_seed_001_tensor_api_lines_run_on_python():
  """Seed 001 is a web page without code fences: its Python statements from "Setup" to "The Three Operation Types"
  (Tensor API, materializing, laziness) run one after another. Lines about a training loss or setting DEBUG in the
  environment belong to other parts and are left out."""
  import numpy as np
  from refimpl import Tensor
  text = next(SEEDS.glob("001_*")).read_text()
  part = text[text.index("Part 2: Setup and First Steps"):text.index("Part 5: The Three Operation Types")]
  stmt = re.compile(r"^(from |[a-z_][a-z_0-9]* = |print\(|[a-z]\.realize\(\))")
  lines = [ln for ln in part.splitlines() if stmt.match(ln) and "loss" not in ln and "os." not in ln]
  assert len(lines) >= 30
  ns = {"Tensor": Tensor, "np": np}
  _run_blocks(["\n".join(lines)], ns, compare=False)
  assert ns["m"].shape == (4, 1) and ns["c"].shape == (4, 4) and ns["arr"].shape == (3, 3)
  assert ns["y"].uop.op.name == "ADD"
