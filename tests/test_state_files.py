"""Files as tensors (spec/state.md STATE.IO, STATE.ARCHIVE, STATE.TORCH, STATE.LOAD.verbose): TensorIO,
accept_filename, tar_extract, zip_extract and torch_load against files written by tarfile, zipfile and torch.save."""
from __future__ import annotations

import io
import pickle
import tarfile
import zipfile

import numpy as np
import pytest
import torch

from refimpl import Tensor, dtypes, nn
from refimpl.helpers import SpecError
from refimpl.nn.state import (TensorIO, accept_filename, load_state_dict, safe_load, safe_load_metadata, safe_save,
                              tar_extract, torch_load, zip_extract)


def _u8(raw: bytes) -> Tensor:
  return Tensor(np.frombuffer(raw, np.uint8).copy())


def test_tensorio_reads_and_seeks():
  """STATE.IO: read, readinto, seek from start/current/end (clamped) and tell, over the tensor's bytes."""
  raw = bytes(range(50))
  f = TensorIO(_u8(raw))
  assert f.read(5) == raw[:5] and f.tell() == 5
  f.seek(-3, io.SEEK_END)
  assert f.read() == raw[-3:]
  assert f.seek(10) == 10 and f.seek(5, io.SEEK_CUR) == 15 and f.read(2) == raw[15:17]
  assert f.seek(-100) == 0 and f.seek(100) == 50 and f.read(4) == b""
  assert io.BufferedReader(TensorIO(_u8(raw))).read() == raw
  with pytest.raises(SpecError, match="STATE.IO"): TensorIO(Tensor([1.0, 2.0]))
  with pytest.raises(SpecError, match="STATE.IO"): TensorIO(_u8(raw).reshape(5, 10))


def test_accept_filename_takes_paths_and_tensors(tmp_path):
  """STATE.IO.filename: a str or Path becomes the file's bytes as a 1-d uint8 tensor; a Tensor passes through."""
  seen = []
  fn = accept_filename(lambda t: seen.append(t) or t.numpy().tobytes())
  (tmp_path / "f.bin").write_bytes(b"hello")
  assert fn(str(tmp_path / "f.bin")) == b"hello" and fn(tmp_path / "f.bin") == b"hello"
  t = _u8(b"abc")
  assert fn(t) == b"abc" and seen[-1] is t and seen[0].dtype == dtypes.uint8


def test_tar_extract(tmp_path):
  """STATE.ARCHIVE.tar: regular files by name, with their bytes; directories are left out; junk is refused."""
  path = tmp_path / "a.tar"
  with tarfile.open(path, "w") as tar:
    for name, data in (("x.bin", b"\x01\x02\x03"), ("d/y.txt", b"hi there"), ("empty", b"")):
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
    d = tarfile.TarInfo("d")
    d.type = tarfile.DIRTYPE
    tar.addfile(d)
  files = tar_extract(path)
  assert list(files) == ["x.bin", "d/y.txt", "empty"]
  assert files["x.bin"].numpy().tobytes() == b"\x01\x02\x03" and files["d/y.txt"].numpy().tobytes() == b"hi there"
  assert files["empty"].shape == (0,)
  with pytest.raises(SpecError, match="STATE.ARCHIVE.tar"): tar_extract(_u8(b"not a tar file" * 10))


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_zip_extract(tmp_path, compression):
  """STATE.ARCHIVE.zip: stored and deflated members by name with their bytes, extra fields in the local header."""
  path = tmp_path / "a.zip"
  payload = {"a.bin": bytes(range(200)) * 3, "dir/b.txt": b"text " * 40, "z": b""}
  with zipfile.ZipFile(path, "w", compression) as z:
    for name, data in payload.items(): z.writestr(name, data)
  files = zip_extract(path)
  assert list(files) == list(payload)
  for name, data in payload.items(): assert files[name].numpy().tobytes() == data
  with pytest.raises(SpecError, match="STATE.ARCHIVE.zip"): zip_extract(_u8(b"PK not really" * 4))


def _torch_state():
  base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
  return {
    "plain": base, "transposed": base.t(), "slice": base[1:3, 2:5], "step": base[:, ::2],
    "expanded": base[0].unsqueeze(0).expand(3, 6), "scalar": torch.tensor(3.5), "empty": torch.zeros(0, 3),
    "f64": torch.tensor([[1.5, -0.0], [float("inf"), 1e-300]], dtype=torch.float64),
    "f16": torch.tensor([1.0, -2.5, 65504.0], dtype=torch.float16),
    "bf16": torch.tensor([1.5, -2.0, 3e38], dtype=torch.bfloat16),
    "i64": torch.tensor([-(2 ** 40), 7]), "i32": torch.tensor([-5], dtype=torch.int32),
    "i16": torch.tensor([-300], dtype=torch.int16), "i8": torch.tensor([-1, 2], dtype=torch.int8),
    "u8": torch.tensor([255, 0], dtype=torch.uint8), "bool": torch.tensor([True, False, True]),
    "param": torch.nn.Parameter(torch.ones(2, 2)),
  }


def _same(ours: Tensor, ref: torch.Tensor) -> bool:
  ref = ref.detach().contiguous()
  if ours.shape != tuple(ref.shape): return False
  if ref.dtype == torch.bfloat16:
    return ours.bitcast(dtypes.uint16).numpy().tobytes() == ref.view(torch.int16).numpy().tobytes()
  return ours.numpy().tobytes() == ref.numpy().tobytes()


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_torch_load_matches_torch_save(tmp_path, legacy):
  """STATE.TORCH.zip / STATE.TORCH.legacy, STATE.TORCH.dtype, STATE.TORCH.view: every dtype torch has a storage
  class for, views with offsets, transposed, step and zero strides, 0-d and empty tensors, parameters; bits equal."""
  state = _torch_state()
  path = tmp_path / "m.pth"
  torch.save(state, path, _use_new_zipfile_serialization=not legacy)
  loaded = torch_load(path)
  assert list(loaded) == list(state)
  for name, ref in state.items():
    assert _same(loaded[name], ref), name
  assert loaded["f16"].dtype == dtypes.float16 and loaded["bool"].dtype == dtypes.bool
  assert loaded["i64"].dtype == dtypes.int64 and loaded["bf16"].dtype == dtypes.bfloat16
  assert _same(torch_load(Tensor(np.frombuffer(path.read_bytes(), np.uint8).copy()))["slice"], state["slice"])


def test_torch_load_nested_and_a_model(tmp_path):
  """STATE.TORCH: an OrderedDict state dict of a torch module, and nested containers, load as torch saved them."""
  model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
  torch.save(model.state_dict(), tmp_path / "sd.pth")
  loaded = torch_load(tmp_path / "sd.pth")
  assert list(loaded) == list(model.state_dict())
  for k, v in model.state_dict().items(): assert _same(loaded[k], v)
  torch.save({"a": [torch.ones(2), (torch.zeros(1), 3)], "n": "text"}, tmp_path / "nested.pth")
  nested = torch_load(tmp_path / "nested.pth")
  assert nested["n"] == "text" and nested["a"][1][1] == 3 and nested["a"][0].tolist() == [1.0, 1.0]


class _Evil:
  def __reduce__(self): return (print, ("this must not run",))


def test_torch_load_refuses_foreign_globals(tmp_path, capsys):
  """STATE.TORCH.pickle: a global other than containers, tensors and storages is refused and never called."""
  torch.save({"w": torch.ones(2), "x": _Evil()}, tmp_path / "evil.pth")
  with pytest.raises(SpecError, match="STATE.TORCH.pickle.*print"): torch_load(tmp_path / "evil.pth")
  assert "must not run" not in capsys.readouterr().out


def test_torch_load_refuses_other_formats(tmp_path):
  """STATE.TORCH.format: neither a zip archive nor the legacy magic; STATE.TORCH.zip: a zip without data.pkl."""
  (tmp_path / "x.pth").write_bytes(pickle.dumps({"a": 1}))
  with pytest.raises(SpecError, match="STATE.TORCH.format"): torch_load(tmp_path / "x.pth")
  with zipfile.ZipFile(tmp_path / "y.pth", "w") as z: z.writestr("other.txt", b"x")
  with pytest.raises(SpecError, match="STATE.TORCH.zip"): torch_load(tmp_path / "y.pth")


def test_safetensors_parameter_names(tmp_path):
  """STATE.SAFETENSORS.save/load: tinygrad's parameter names fn, t and metadata work as keywords."""
  path = tmp_path / "t.safetensors"
  safe_save(tensors={"a": Tensor([1.0, 2.0])}, fn=path, metadata={"k": "v"})
  assert safe_load(fn=path)["a"].tolist() == [1.0, 2.0]
  assert safe_load_metadata(t=path)[2]["__metadata__"] == {"k": "v"}


def test_load_state_dict_verbose_prints_one_line(capsys):
  """STATE.LOAD.verbose: the default prints one summary line; verbose=False prints nothing."""
  layer = nn.Linear(2, 3)
  load_state_dict(layer, {"weight": Tensor.ones(3, 2), "bias": Tensor.zeros(3)})
  out = capsys.readouterr().out.splitlines()
  assert len(out) == 1 and "2 tensors" in out[0] and "bytes" in out[0]
  load_state_dict(layer, {"weight": Tensor.ones(3, 2), "bias": Tensor.zeros(3)}, verbose=False)
  assert capsys.readouterr().out == ""
