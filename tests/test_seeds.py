"""The seed documents' examples run with `refimpl` in place of `tinygrad` (../shared/seeds, beside the checkout).

Each example section's Python blocks run in order in one namespace; a block that is a printed UOp (it starts with
`UOp(`) is the expected output of the block before it and is compared with what that block printed."""
import contextlib
import io
import re
from pathlib import Path

import pytest

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
# section heading in the seed -> the seed file it is in
SECTIONS = {"Low-Level UOP Construction": "000_", "Pattern Matching and Graph Rewriting": "000_"}


def _section_blocks(name: str) -> list[str]:
  text = next(SEEDS.glob(SECTIONS[name] + "*")).read_text()
  start = text.index(f"### {name}")
  end = text.find("\n## ", start)
  end2 = text.find("\n### ", start + 1)
  body = text[start:min(e for e in (end, end2, len(text)) if e != -1)]
  return re.findall(r"```python\n(.*?)```", body, re.S)


def _run_blocks(blocks: list[str], ns: dict) -> int:
  """Run the blocks; returns how many printed-output blocks were compared."""
  printed, compared = "", 0
  for block in blocks:
    code = block.replace("tinygrad", "refimpl")
    if code.lstrip().startswith("UOp("):
      assert printed.strip().splitlines()[-len(code.strip().splitlines()):] == code.strip().splitlines()
      compared += 1
      continue
    out = io.StringIO()
    with contextlib.redirect_stdout(out): exec(compile(code, "<seed>", "exec"), ns)
    printed = out.getvalue()
  return compared


@pytest.mark.skipif(not SEEDS.is_dir(), reason="seed documents live in ../shared/seeds beside the checkout")
def test_seed_000_uop_and_pattern_sections_run_unchanged():
  ns: dict = {}
  blocks = _section_blocks("Low-Level UOP Construction") + _section_blocks("Pattern Matching and Graph Rewriting")
  assert len(blocks) >= 4
  assert _run_blocks(blocks, ns) == 1   # the printed form of `a + b` in "Low-Level UOP Construction"
  from refimpl.uop import UOp, Ops
  from refimpl.dtype import dtypes
  assert ns["a_plus_b_simplified"] is UOp(Ops.CONST, dtypes.int, arg=4)
