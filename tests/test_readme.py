"""The README's Python example runs as written (it is the first thing a user copies)."""
import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_training_example_runs(tmp_path, monkeypatch):
  blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
  assert blocks, "the README has no Python example"
  monkeypatch.chdir(tmp_path)
  ns: dict = {}
  exec(compile(blocks[0], "README.md", "exec"), ns)
  assert np.isfinite(ns["loss"].item())
  assert (tmp_path / "model.safetensors").stat().st_size > 8
