"""refimpl.nn.state against spec/state.md: state dict names, load_state_dict, and safetensors files read and written
both ways with the `safetensors` package, bit for bit.

Expected bytes and names are computed here independently: file layouts are parsed by hand with struct/json, bit
patterns come from numpy views, and the safetensors package (numpy and torch front ends) is the outside reader and
writer.
"""
from __future__ import annotations

import json
import struct
from collections import namedtuple

import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch

from refimpl import Tensor, dtypes
from refimpl.helpers import SpecError
from refimpl.nn.state import (get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_metadata,
                              safe_save)

# dtype, safetensors code, numpy type holding its bits (bfloat16: its 16 bits as uint16), exponent/mantissa bits
DTYPES = [
  (dtypes.float64, "F64", np.float64, (11, 52)), (dtypes.float32, "F32", np.float32, (8, 23)),
  (dtypes.float16, "F16", np.float16, (5, 10)), (dtypes.bfloat16, "BF16", np.uint16, (8, 7)),
  (dtypes.int64, "I64", np.int64, None), (dtypes.int32, "I32", np.int32, None), (dtypes.int16, "I16", np.int16, None),
  (dtypes.int8, "I8", np.int8, None), (dtypes.uint64, "U64", np.uint64, None), (dtypes.uint32, "U32", np.uint32, None),
  (dtypes.uint16, "U16", np.uint16, None), (dtypes.uint8, "U8", np.uint8, None), (dtypes.bool, "BOOL", np.bool_, None)]
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
TORCH_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _float_specials(width: int, ebits: int, mbits: int) -> list[int]:
  """Bit patterns of the IEEE edge cases of a float format: NaN payloads (quiet, signalling, negative), -0.0, the
  smallest and largest subnormals of both signs, both infinities."""
  sign, exp_all = 1 << (width - 1), ((1 << ebits) - 1) << mbits
  quiet = 1 << (mbits - 1)
  return [exp_all | quiet | 1, exp_all | 1, sign | exp_all | quiet | 0b101, sign, 1, (1 << mbits) - 1,
          sign | 1, exp_all, sign | exp_all]


def _sample(np_type, fmt, rng: np.random.Generator, n: int = 24) -> np.ndarray:
  """n values with arbitrary bits (random bytes), floats with every special pattern at the front."""
  if np_type is np.bool_: return rng.integers(0, 2, n).astype(np.bool_)
  width = np.dtype(np_type).itemsize
  bits = np.frombuffer(rng.bytes(n * width), UINT[width]).copy()
  if fmt is not None:
    specials = _float_specials(8 * width, *fmt)
    bits[:len(specials)] = specials[:n]
  return bits.view(np_type)


def _tensor(arr: np.ndarray, dt) -> Tensor:
  """A refimpl tensor holding exactly the bits of `arr` (bfloat16: `arr` is its uint16 bits)."""
  return Tensor(arr).bitcast(dtypes.bfloat16) if dt == dtypes.bfloat16 else Tensor(arr)


def _bits(t: Tensor) -> np.ndarray:
  """The element bits of a refimpl tensor as unsigned ints (bfloat16 reads back as float32 = bits << 16)."""
  out = t.numpy()
  if t.dtype == dtypes.bfloat16:
    wide = out.view(np.uint32)
    assert not (wide & 0xFFFF).any()
    return (wide >> 16).astype(np.uint16)
  return out.view(UINT[out.dtype.itemsize])


def _ubits(arr: np.ndarray) -> np.ndarray:
  return arr.view(UINT[arr.dtype.itemsize])


def _parse_by_hand(raw: bytes) -> tuple[dict, bytes]:
  """Header and data area of a safetensors file, checking the framing rules of STATE.SAFETENSORS.layout/header."""
  (n,) = struct.unpack("<Q", raw[:8])
  text = raw[8:8 + n]
  assert n % 8 == 0 and text.startswith(b"{")
  body = text.rstrip(b" ")
  assert len(text) - len(body) < 8   # spaces pad the header to the next multiple of 8, no further
  return json.loads(body), raw[8 + n:]


# ---- safetensors: our writer, every reader ----

@pytest.mark.parametrize("dt,code,np_type,fmt", DTYPES, ids=[d[1] for d in DTYPES])
def test_safe_save_bits_and_layout(tmp_path, dt, code, np_type, fmt):
  """STATE.SAFETENSORS.*: every dtype, a 2-d, a 0-d and a 0-size tensor, round trip bit for bit; the file's framing
  and bytes are as the spec says; the safetensors package reads the same bits and the metadata."""
  rng = np.random.default_rng(len(code) * 1000 + np.dtype(np_type).itemsize)
  arrays = {"w.main": _sample(np_type, fmt, rng).reshape(4, 6), "scalar": _sample(np_type, fmt, rng, 1).reshape(()),
            "empty": _sample(np_type, fmt, rng, 0).reshape(3, 0)}
  path = tmp_path / "t.safetensors"
  safe_save({k: _tensor(a, dt) for k, a in arrays.items()}, path, metadata={"format": "tinyspec", "step": "7"})

  header, data = _parse_by_hand(path.read_bytes())
  assert list(header) == ["__metadata__", *arrays] and header["__metadata__"] == {"format": "tinyspec", "step": "7"}
  offset = 0
  for name, a in arrays.items():
    le = a.astype(a.dtype.newbyteorder("<")).tobytes()
    assert header[name] == {"dtype": code, "shape": list(a.shape), "data_offsets": [offset, offset + len(le)]}
    assert data[offset:offset + len(le)] == le
    offset += len(le)
  assert len(data) == offset

  loaded = safe_load(path)
  assert list(loaded) == list(arrays)
  for name, a in arrays.items():
    assert loaded[name].dtype == dt and loaded[name].shape == a.shape
    np.testing.assert_array_equal(_bits(loaded[name]), _ubits(a))

  if dt == dtypes.bfloat16:   # numpy has no bfloat16: read it through torch
    theirs = {k: v.view(torch.int16).numpy().view(np.uint16) for k, v in safetensors.torch.load_file(path).items()}
  else: theirs = safetensors.numpy.load_file(path)
  for name, a in arrays.items():
    assert theirs[name].shape == a.shape
    np.testing.assert_array_equal(_ubits(theirs[name]), _ubits(a))
  with safetensors.safe_open(path, "np" if dt != dtypes.bfloat16 else "pt") as f:
    assert f.metadata() == {"format": "tinyspec", "step": "7"}


@pytest.mark.parametrize("dt,code,np_type,fmt", DTYPES, ids=[d[1] for d in DTYPES])
def test_safe_load_reads_package_files(tmp_path, dt, code, np_type, fmt):
  """STATE.SAFETENSORS.load: a file written by safetensors.numpy (safetensors.torch for bfloat16) comes back with
  identical bits, and its metadata through safe_load_metadata."""
  rng = np.random.default_rng(7 + np.dtype(np_type).itemsize)
  arrays = {"a": _sample(np_type, fmt, rng).reshape(2, 3, 4), "b": _sample(np_type, fmt, rng, 1).reshape(()),
            "c": _sample(np_type, fmt, rng, 0)}
  path = tmp_path / "theirs.safetensors"
  meta = {"producer": "safetensors", "note": "ünïcode"}
  if dt == dtypes.bfloat16:
    safetensors.torch.save_file({k: torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) for k, a in
                                 arrays.items()}, path, metadata=meta)
  else: safetensors.numpy.save_file(arrays, path, metadata=meta)
  loaded = safe_load(path)
  assert set(loaded) == set(arrays)
  for name, a in arrays.items():
    assert loaded[name].dtype == dt and loaded[name].shape == a.shape
    np.testing.assert_array_equal(_bits(loaded[name]), _ubits(a))
  whole, start, header = safe_load_metadata(path)
  raw = path.read_bytes()
  assert header["__metadata__"] == meta and start == 8 + struct.unpack("<Q", raw[:8])[0]
  assert whole.dtype == dtypes.uint8 and whole.numpy().tobytes() == raw


def test_mixed_dtype_file_from_torch(tmp_path):
  """STATE.SAFETENSORS.offsets: the package lays out data by alignment, not in header order; a file with all 13
  dtypes written by safetensors.torch loads bit for bit, and our file of all 13 loads in torch bit for bit."""
  rng = np.random.default_rng(3)
  arrays = {code: _sample(np_type, fmt, rng, 5) for _, code, np_type, fmt in DTYPES}

  def to_torch(code, a):
    if code == "BF16": return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a.view(np.uint8)).view(getattr(torch, a.dtype.name) if a.dtype != np.bool_ else torch.bool)
  safetensors.torch.save_file({k: to_torch(k, a) for k, a in arrays.items()}, tmp_path / "mixed.safetensors")
  loaded = safe_load(tmp_path / "mixed.safetensors")
  for (dt, code, _, _) in DTYPES:
    assert loaded[code].dtype == dt
    np.testing.assert_array_equal(_bits(loaded[code]), _ubits(arrays[code]))

  safe_save(loaded, tmp_path / "ours.safetensors")
  back = safetensors.torch.load_file(tmp_path / "ours.safetensors")
  for code, a in arrays.items():
    t = back[code]
    got = t.view(TORCH_BITS[t.element_size()]).numpy() if t.dtype != torch.bool else t.numpy()
    np.testing.assert_array_equal(_ubits(np.ascontiguousarray(got)), _ubits(a))


def test_safe_load_sources_agree(tmp_path):
  """STATE.SAFETENSORS.load: a path, the file's bytes, a memoryview and a 1-d uint8 tensor of them give the same."""
  payload = safetensors.numpy.save({"x": np.arange(-3, 9, dtype=np.int16).reshape(3, 4)})
  (tmp_path / "f.safetensors").write_bytes(payload)
  sources = [tmp_path / "f.safetensors", str(tmp_path / "f.safetensors"), payload, bytearray(payload),
             memoryview(payload), Tensor(np.frombuffer(payload, np.uint8))]
  for src in sources:
    (name, t), = safe_load(src).items()
    assert name == "x" and t.shape == (3, 4) and t.numpy().tolist() == np.arange(-3, 9).reshape(3, 4).tolist()


# ---- safetensors: corrupt files ----

def _file(header: dict | bytes, data: bytes = b"", n: int | None = None) -> bytes:
  """A safetensors file built by hand, with an arbitrary header (dict -> JSON) and header length."""
  text = header if isinstance(header, bytes) else json.dumps(header).encode()
  return struct.pack("<Q", len(text) if n is None else n) + text + data


def _f32(shape, begin, end, code="F32") -> dict:
  return {"dtype": code, "shape": shape, "data_offsets": [begin, end]}


CORRUPT = {
  "empty file": (b"", "STATE.SAFETENSORS.layout"),
  "shorter than the length": (b"\x10\x00\x00", "STATE.SAFETENSORS.layout"),
  "length past the end": (_file({"a": _f32([1], 0, 4)}, b"\0" * 4, n=10 ** 6), "STATE.SAFETENSORS.layout"),
  "not json": (_file(b"{this is not json}"), "STATE.SAFETENSORS.header"),
  "not an object": (_file(b"[1, 2]   "), "STATE.SAFETENSORS.header"),
  "not utf-8": (_file(b'{"\xff": 1}'), "STATE.SAFETENSORS.header"),
  "duplicate name": (_file(b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, '
                           b'"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', b"\0"),
                     "STATE.SAFETENSORS.header"),
  "unknown dtype": (_file({"a": _f32([1], 0, 1, "F8_E4M3")}, b"\0"), "STATE.SAFETENSORS.dtype"),
  "negative dim": (_file({"a": _f32([2, -1], 0, 0)}), "STATE.SAFETENSORS.header"),
  "float dim": (_file({"a": _f32([2.0], 0, 8)}, b"\0" * 8), "STATE.SAFETENSORS.header"),
  "reversed offsets": (_file({"a": _f32([0], 8, 4)}, b"\0" * 8), "STATE.SAFETENSORS.header"),
  "missing field": (_file({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4), "STATE.SAFETENSORS.header"),
  "extra field": (_file({"a": {**_f32([1], 0, 4), "stride": [1]}}, b"\0" * 4), "STATE.SAFETENSORS.header"),
  "shape vs bytes": (_file({"a": _f32([3], 0, 8)}, b"\0" * 8), "STATE.SAFETENSORS.shape"),
  "overlap": (_file({"a": _f32([2], 0, 8), "b": _f32([2], 4, 12)}, b"\0" * 12), "STATE.SAFETENSORS.offsets"),
  "gap": (_file({"a": _f32([2], 0, 8), "b": _f32([1], 12, 16)}, b"\0" * 16), "STATE.SAFETENSORS.offsets"),
  "trailing bytes": (_file({"a": _f32([1], 0, 4)}, b"\0" * 6), "STATE.SAFETENSORS.offsets"),
  "out of range": (_file({"a": _f32([4], 0, 16)}, b"\0" * 8), "STATE.SAFETENSORS.offsets"),
  "metadata not strings": (_file({"__metadata__": {"step": 3}}), "STATE.SAFETENSORS.metadata"),
  "bool byte 2": (_file({"a": _f32([2], 0, 2, "BOOL")}, b"\x01\x02"), "STATE.SAFETENSORS.data"),
}


@pytest.mark.parametrize("name", list(CORRUPT))
def test_corrupt_file_is_a_spec_error(name):
  """Every malformed file is rejected with a SpecError naming the clause it breaks."""
  raw, clause = CORRUPT[name]
  with pytest.raises(SpecError) as e: safe_load(raw)
  assert e.value.clause == clause, str(e.value)


def test_truncated_file_is_a_spec_error(tmp_path):
  """A valid file cut short (a partial download) is rejected, not read with garbage (STATE.SAFETENSORS.offsets)."""
  safetensors.numpy.save_file({"a": np.ones(8, np.float32)}, tmp_path / "ok.safetensors")
  (tmp_path / "cut.safetensors").write_bytes((tmp_path / "ok.safetensors").read_bytes()[:-4])
  with pytest.raises(SpecError, match="runs past the end") as e: safe_load(tmp_path / "cut.safetensors")
  assert e.value.clause == "STATE.SAFETENSORS.offsets"


@pytest.mark.parametrize("tensors,metadata,clause", [
  ({"a": Tensor([1.0])}, {"step": 3}, "STATE.SAFETENSORS.metadata"),
  ({"__metadata__": Tensor([1.0])}, None, "STATE.SAFETENSORS.save"),
  ({"a": np.ones(2)}, None, "STATE.SAFETENSORS.save"),
], ids=["metadata", "reserved name", "not a tensor"])
def test_safe_save_rejects_before_writing(tmp_path, tensors, metadata, clause):
  """STATE.SAFETENSORS.save: bad input raises and leaves no file behind."""
  path = tmp_path / "never.safetensors"
  with pytest.raises(SpecError) as e: safe_save(tensors, path, metadata)
  assert e.value.clause == clause and not path.exists()


# ---- state dicts ----

Pair = namedtuple("Pair", ["first", "second"])


class Block:
  def __init__(self, n: int, seed: int):
    rng = np.random.default_rng(seed)
    self.weight = Tensor(rng.standard_normal((n, n)).astype(np.float32), requires_grad=True)
    self.bias = Tensor(rng.standard_normal(n).astype(np.float32))
    self.scale, self.label = 0.5, "block"   # not tensors: no names


class Net:
  def __init__(self):
    self.embed = Tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    self.layers = [Block(3, 1), Block(3, 2)]
    self.heads = {"cls": Block(2, 3), "extra": (Tensor(np.array(1.5, np.float32)), None)}
    self.pair = Pair(Tensor(np.array([1, 2], np.int64)), Tensor(np.array([True, False])))
    self.lib = np   # a module: not walked
    self.layers[1].owner = self   # a cycle back to the root


NET_KEYS = ["embed", "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias", "heads.cls.weight",
            "heads.cls.bias", "heads.extra.0", "pair.first", "pair.second"]


def test_state_dict_names_and_order():
  """STATE.DICT.walk/order/cycle: attributes, list indices, dict keys, namedtuple fields, in walk order; the cycle
  and the module add nothing; values are the model's own Tensor objects."""
  net = Net()
  sd = get_state_dict(net)
  assert list(sd) == NET_KEYS
  assert sd["layers.1.bias"] is net.layers[1].bias and sd["heads.extra.0"] is net.heads["extra"][0]
  assert sd["pair.second"] is net.pair.second
  assert list(get_state_dict(net.heads, prefix="heads.")) == NET_KEYS[5:8]
  assert get_state_dict(net.embed) == {"": net.embed}


def test_parameters_dedup_shared():
  """STATE.DICT.shared, STATE.PARAMS: a tied weight has two names but is one parameter."""
  net = Net()
  net.tied = net.embed
  assert list(get_state_dict(net)) == NET_KEYS + ["tied"]
  params = get_parameters(net)
  assert len(params) == len(NET_KEYS) and params[0] is net.embed
  assert [id(p) for p in params] == [id(t) for k, t in get_state_dict(net).items() if k != "tied"]


# ---- load_state_dict ----

def test_load_keeps_identity_and_bits(tmp_path):
  """STATE.LOAD.identity/exact: after a safetensors round trip the model holds the saved bits (NaN payloads, -0.0,
  subnormals, bfloat16 specials) in the same Tensor objects, with requires_grad kept."""
  rng = np.random.default_rng(11)
  f32, f16 = _sample(np.float32, (8, 23), rng, 9), _sample(np.float16, (5, 10), rng, 9)
  bf16 = _sample(np.uint16, (8, 7), rng, 9)

  class M:
    def __init__(self, a, b, c):
      self.a = Tensor(a, requires_grad=True)
      self.b, self.c = Tensor(b), Tensor(c).bitcast(dtypes.bfloat16)
  src = M(f32, f16, bf16)
  safe_save(get_state_dict(src), tmp_path / "m.safetensors")
  dst = M(np.zeros(9, np.float32), np.zeros(9, np.float16), np.zeros(9, np.uint16))
  before = get_parameters(dst)
  loaded = load_state_dict(dst, safe_load(tmp_path / "m.safetensors"))
  assert [id(t) for t in loaded] == [id(t) for t in before] == [id(t) for t in get_parameters(dst)]
  assert dst.a.requires_grad is True
  np.testing.assert_array_equal(_bits(dst.a), _ubits(f32))
  np.testing.assert_array_equal(_bits(dst.b), _ubits(f16))
  np.testing.assert_array_equal(_bits(dst.c), bf16)


def test_load_strict_names_every_problem():
  """STATE.LOAD.strict/match/atomic: one error lists the missing key, the unexpected key, the shape mismatch and the
  dtype mismatch, and the model is left as it was."""
  net, other = Net(), Net()
  sd = get_state_dict(other)
  del sd["layers.0.bias"]
  sd["decoder.weight"] = Tensor([1.0])
  sd["embed"] = Tensor(np.zeros((3, 4), np.float32))
  sd["pair.first"] = Tensor(np.array([1, 2], np.int32))
  for k in ("layers.1.weight", "heads.cls.bias"): sd[k] = sd[k] + 100   # values that would show if loaded
  snapshot = {k: v.numpy().copy() for k, v in get_state_dict(net).items()}
  with pytest.raises(SpecError) as e: load_state_dict(net, sd)
  msg = str(e.value)
  assert e.value.clause == "STATE.LOAD.strict"
  for needle in ("'layers.0.bias'", "'decoder.weight'", "'embed'", "(4, 3)", "(3, 4)", "'pair.first'",
                 "dtypes.long", "dtypes.int"):
    assert needle in msg, (needle, msg)
  assert "layers.1.weight" not in msg
  for k, v in get_state_dict(net).items(): np.testing.assert_array_equal(v.numpy(), snapshot[k])


def test_load_non_strict_skips_missing_but_not_mismatches():
  """STATE.LOAD.strict: strict=False skips missing and ignores unexpected names; STATE.LOAD.match still refuses a
  shape mismatch."""
  net, other = Net(), Net()
  sd = {k: v * 2 if dtypes.is_float(v.dtype) else v for k, v in get_state_dict(other).items()}
  expected = {k: v.numpy() for k, v in sd.items()}
  del sd["embed"]
  sd["unused"] = Tensor([0.0])
  old_embed = net.embed.numpy().copy()
  loaded = load_state_dict(net, sd, strict=False)
  assert len(loaded) == len(NET_KEYS) - 1
  np.testing.assert_array_equal(net.embed.numpy(), old_embed)
  for k, v in get_state_dict(net).items():
    if k != "embed": np.testing.assert_array_equal(v.numpy(), expected[k])
  sd["layers.0.bias"] = Tensor(np.zeros(4, np.float32))
  with pytest.raises(SpecError, match=r"'layers.0.bias': shape mismatch") as e: load_state_dict(net, sd, strict=False)
  assert e.value.clause == "STATE.LOAD.match"


def test_load_scalar_shape_consume_and_device():
  """STATE.LOAD.match: () and (1,) load into each other; STATE.LOAD.consume empties the dict as it goes;
  STATE.LOAD.device: values move to the model tensor's device."""
  class M:
    def __init__(self, device=None):
      self.s = Tensor(np.array(0.0, np.float32), device=device)
      self.v = Tensor(np.zeros(1, np.float32), device=device)
      self.w = Tensor(np.zeros((2, 2), np.int16), device=device)
  m = M(device="PYTHON:1")
  sd = {"s": Tensor([2.5]), "v": Tensor(np.array(-1.0, np.float32)), "w": Tensor(np.array([[1, -2], [3, -4]],
                                                                                           np.int16))}
  load_state_dict(m, sd, consume=True)
  assert sd == {}
  assert m.s.shape == () and m.s.item() == 2.5 and m.v.shape == (1,) and m.v.tolist() == [-1.0]
  assert m.w.tolist() == [[1, -2], [3, -4]]
  assert {t.device for t in get_parameters(m)} == {"PYTHON:1"}
  assert (m.w + 1).tolist() == [[2, -1], [4, -3]]   # the moved value computes on its device


def test_load_value_must_be_tensor():
  """STATE.LOAD.value: a numpy array in the state dict is named in the error."""
  class M:
    def __init__(self): self.w = Tensor([1.0, 2.0])
  with pytest.raises(SpecError, match="'w': value is a ndarray"): load_state_dict(M(), {"w": np.ones(2)})


def test_load_into_hash_consed_params(capsys):
  """STATE.LOAD.identity: two parameters made by identical lazy graphs (Tensor.zeros twice is one hash-consed UOp,
  and realizing it gives both one buffer) each receive their own value, and neither aliases the state dict."""
  class M:
    def __init__(self): self.b1, self.b2 = Tensor.zeros(3), Tensor.zeros(3)
  m = M()
  m.b1.realize()
  sd = {"b1": Tensor([1.0, 2.0, 3.0]), "b2": Tensor([-4.0, -5.0, -6.0])}
  load_state_dict(m, sd, verbose=True)
  assert m.b1.tolist() == [1.0, 2.0, 3.0] and m.b2.tolist() == [-4.0, -5.0, -6.0]
  assert m.b1.uop is not sd["b1"].uop and m.b2.uop is not sd["b2"].uop
  assert "load_state_dict: 2 tensors" in capsys.readouterr().out
