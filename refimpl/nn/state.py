"""Model state (spec/state.md): naming a model's tensors, loading values into them, and the safetensors file format.

API names and behaviour follow tinygrad's `nn.state`: `get_state_dict get_parameters load_state_dict safe_save
safe_load safe_load_metadata TensorIO accept_filename tar_extract zip_extract torch_load` (torch files:
torch_load.py). Data moves as raw bytes between files and device buffers (no value conversion, no kernel), which
is what makes saving and loading exact to the bit (STATE.LOAD.exact).
"""
from __future__ import annotations

import functools
import io
import json
import math
import os
import pathlib
import sys
import tarfile
import time
import types
import zipfile
import zlib
from typing import Callable

import numpy as np

from refimpl.device import Buffer, Device
from refimpl.dtype import DType, dtypes
from refimpl.engine.realize import buffer_for
from refimpl.engine.schedule import new_buffer
from refimpl.helpers import SpecError, SpecRuntimeError, SpecTypeError, SpecValueError
from refimpl.nn.torch_load import torch_load_bytes
from refimpl.tensor import Tensor
from refimpl.uop import Ops
from refimpl.uop.ops import UOp

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata",
           "safe_dtypes", "inverse_safe_dtypes", "TensorIO", "accept_filename", "tar_extract", "zip_extract",
           "torch_load"]

# STATE.SAFETENSORS.dtype: the file's dtype codes
safe_dtypes: dict[str, DType] = {
  "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16, "BF16": dtypes.bfloat16,
  "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8,
  "U64": dtypes.uint64, "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8, "BOOL": dtypes.bool}
inverse_safe_dtypes: dict[DType, str] = {v: k for k, v in safe_dtypes.items()}

# numpy types of the same width, used only to swap byte order on big-endian hosts (bfloat16 travels as uint16)
_NP_SAME_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_ENTRY_FIELDS = {"dtype", "shape", "data_offsets"}


# ---- state dicts ----

def get_state_dict(obj, prefix: str = "", tensor_type=Tensor) -> dict[str, Tensor]:
  """Every tensor reachable from `obj`, by dotted name (`layers.0.weight`), in walk order (STATE.DICT)."""
  out: dict[str, Tensor] = {}
  _walk(obj, prefix, tensor_type, out, set())
  return out


def _walk(obj, prefix: str, tensor_type, out: dict, on_path: set[int]) -> None:
  if isinstance(obj, tensor_type):
    out[prefix.strip(".")] = obj   # STATE.DICT.walk, STATE.DICT.shared: a repeated name keeps the later tensor
    return
  if isinstance(obj, types.ModuleType) or id(obj) in on_path: return   # STATE.DICT.walk, STATE.DICT.cycle
  if hasattr(obj, "_asdict") and isinstance(obj, tuple): children = obj._asdict().items()   # namedtuple
  elif isinstance(obj, (list, tuple)): children = enumerate(obj)
  elif isinstance(obj, dict): children = obj.items()
  elif isinstance(getattr(obj, "__dict__", None), dict): children = vars(obj).items()
  else: return   # numbers, strings, sets, class objects (their __dict__ is a mappingproxy): no tensors
  on_path.add(id(obj))
  for name, child in list(children): _walk(child, f"{prefix}{name}.", tensor_type, out, on_path)
  on_path.discard(id(obj))


def get_parameters(obj) -> list[Tensor]:
  """The tensors of get_state_dict(obj) in its order, each Tensor object once (STATE.PARAMS)."""
  seen: dict[int, Tensor] = {}
  for t in get_state_dict(obj).values(): seen.setdefault(id(t), t)
  return list(seen.values())


def load_state_dict(model, state_dict: dict[str, Tensor], strict: bool = True, verbose: bool = True,
                    consume: bool = False, realize: bool = True) -> list[Tensor]:
  """Write the values of `state_dict` into the tensors of `model`, keeping the model's Tensor objects
  (STATE.LOAD.identity); returns the model tensors written. All checks come first and a failure raises one SpecError
  that lists every problem (STATE.LOAD.atomic). `verbose` prints one summary line (STATE.LOAD.verbose)."""
  start = time.perf_counter()
  targets = get_state_dict(model)
  values = _checked_values(targets, state_dict, strict)
  shared = _shared_buffers(list(targets.values()))
  loaded, nbytes, in_place = [], 0, 0
  for name, value in values.items():
    target = targets[name]
    in_place += _write_into(target, _on_device(value, target.device), realize, shared)
    if consume: del state_dict[name]   # STATE.LOAD.consume
    loaded.append(target)
    nbytes += target.numel() * target.dtype.itemsize
  if verbose:   # STATE.LOAD.verbose: one line per call
    print(f"load_state_dict: {len(loaded)} tensors ({in_place} written in place with Tensor.assign), {nbytes} bytes "
          f"in {(time.perf_counter() - start) * 1e3:.1f} ms")
  return loaded


def _checked_values(targets: dict[str, Tensor], state_dict: dict, strict: bool) -> dict[str, Tensor]:
  """The value to load for each model name, in the model's order, after every check of STATE.LOAD; raises one
  SpecError naming all problems at once."""
  problems: list[str] = []
  missing = [k for k in targets if k not in state_dict]
  unexpected = [k for k in state_dict if k not in targets]
  if strict and missing: problems.append(f"missing keys (in the model, not in the state dict): {missing}")
  if strict and unexpected: problems.append(f"unexpected keys (in the state dict, not in the model): {unexpected}")
  values: dict[str, Tensor] = {}
  for name, target in targets.items():
    if name not in state_dict: continue   # STATE.LOAD.strict: skipped when not strict, reported above when strict
    value = state_dict[name]
    if not isinstance(value, Tensor):
      problems.append(f"{name!r}: value is a {type(value).__name__}, not a Tensor (STATE.LOAD.value)")
      continue
    if value.dtype != target.dtype:
      problems.append(f"{name!r}: dtype mismatch, the model has {target.dtype!r}, the state dict {value.dtype!r}")
    if value.shape != target.shape:
      if {value.shape, target.shape} == {(), (1,)}: value = value.reshape(target.shape)   # STATE.LOAD.match
      else: problems.append(f"{name!r}: shape mismatch, the model has {target.shape}, the state dict {value.shape}")
    values[name] = value
  if problems:
    clause = "STATE.LOAD.strict" if strict and (missing or unexpected) else "STATE.LOAD.match"
    raise SpecRuntimeError(clause, "load_state_dict failed, nothing was loaded:\n  " + "\n  ".join(problems))
  return values


def _write_into(target: Tensor, value: Tensor, realize: bool, shared: set[UOp]) -> bool:
  """Make `target` (same object) hold the bits of `value`, which is on target's device with its dtype and shape
  (STATE.LOAD.identity). In place through Tensor.assign when the Tensor has it and target owns its buffer, so whoever
  captured that buffer (TinyJit) sees the new values; else target gets a fresh buffer with a copy. Returns whether
  the write was in place."""
  node = _buffer_node(target.uop)
  # a lazy target has no buffer to write into; a buffer that two model tensors share (identical lazy graphs such as
  # two Tensor.zeros(n) are hash-consed, so realizing them gives one buffer) must not take one tensor's value for both
  if hasattr(Tensor, "assign") and node is not None and node not in shared:
    target.assign(value)
    if realize: target.realize()
    return True
  # a copy of the bytes, never value's own buffer: the model must not alias the caller's tensor
  target.uop = _from_bytes(_tensor_bytes(value), value.dtype, value.shape, target.device).uop
  return False


def _shared_buffers(tensors: list[Tensor]) -> set[UOp]:
  """The BUFFER nodes that two or more distinct Tensor objects of `tensors` hold."""
  holders: dict[UOp, set[int]] = {}
  for t in tensors:
    if (node := _buffer_node(t.uop)) is not None: holders.setdefault(node, set()).add(id(t))
  return {node for node, ids in holders.items() if len(ids) > 1}


def _on_device(t: Tensor, device: str) -> Tensor:
  """`t` on `device`: itself if it is there, else a copy of its bytes (STATE.LOAD.device)."""
  return t if t.device == device else _from_bytes(_tensor_bytes(t), t.dtype, t.shape, device)


# ---- raw bytes in and out of device buffers ----

def _from_bytes(data: bytes | memoryview, dtype: DType, shape: tuple[int, ...], device: str | None = None) -> Tensor:
  """A realized tensor whose buffer holds exactly `data` (native byte order): no kernel, no value conversion."""
  n = math.prod(shape)
  node = new_buffer(dtype, n, Device.canonicalize(device) if device else Device.DEFAULT)
  Device[node.src[1].arg].copyin(buffer_for(node), data)
  return Tensor(node if shape == (n,) else UOp(Ops.RESHAPE, dtype, (node,), tuple(shape)))


def _tensor_bytes(t: Tensor) -> bytes:
  """The elements of `t` in row-major order as native-order bytes, realizing `t` first if it is not a buffer."""
  if _buffer_node(t.uop) is None: t.realize()
  if _buffer_node(t.uop) is None: t = t.contiguous().realize()   # a view of a buffer: copy it into its own
  buf: Buffer = buffer_for(_buffer_node(t.uop))
  return Device[buf.device].copyout(buf)


def _buffer_node(u: UOp) -> UOp | None:
  """The BUFFER node that holds u's elements in row-major order, if u is a buffer or a reshape of one."""
  if u.op is Ops.RESHAPE: u = u.src[0]
  return u if u.op is Ops.BUFFER else None


def _swap_to(data: bytes | memoryview, dtype: DType) -> bytes | memoryview:
  """Native <-> little-endian byte order (STATE.SAFETENSORS.data); no work and no copy on little-endian hosts."""
  if sys.byteorder == "little" or dtype.itemsize == 1: return data
  return np.frombuffer(data, _NP_SAME_WIDTH[dtype.itemsize]).byteswap().tobytes()


# ---- safetensors: writing ----

def safe_save(tensors: dict[str, Tensor], fn, metadata: dict[str, str] | None = None) -> None:
  """Write `tensors` (name -> Tensor) to the safetensors file `fn`, with optional string metadata
  (STATE.SAFETENSORS.save). Everything is checked before the file is opened."""
  header: dict[str, object] = {}
  if metadata:
    _check_metadata(metadata)
    header["__metadata__"] = dict(metadata)
  offset = 0
  for name, t in tensors.items():
    if not isinstance(name, str) or name == "__metadata__":
      raise SpecTypeError("STATE.SAFETENSORS.save", f"tensor names are strings other than '__metadata__', got {name!r}")
    if not isinstance(t, Tensor): raise SpecTypeError("STATE.SAFETENSORS.save", f"{name!r} is a {type(t).__name__}")
    if t.dtype not in inverse_safe_dtypes:
      raise SpecTypeError("STATE.SAFETENSORS.dtype", f"{name!r} has dtype {t.dtype!r}, which safetensors cannot hold")
    size = t.numel() * t.dtype.itemsize
    header[name] = {"dtype": inverse_safe_dtypes[t.dtype], "shape": list(t.shape),
                    "data_offsets": [offset, offset + size]}
    offset += size
  text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
  text += b" " * (-len(text) % 8)   # STATE.SAFETENSORS.header: pad in bytes, so the data area starts 8-aligned
  blobs = [_swap_to(_tensor_bytes(t), t.dtype) for t in tensors.values()]   # realize all before writing anything
  with open(os.fspath(fn), "wb") as f:
    f.write(len(text).to_bytes(8, "little"))   # STATE.SAFETENSORS.layout
    f.write(text)
    for blob in blobs: f.write(blob)


def _check_metadata(metadata) -> None:
  if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
    raise SpecTypeError("STATE.SAFETENSORS.metadata", f"metadata must map strings to strings, got {metadata!r}")


# ---- safetensors: reading ----

def safe_load_metadata(t) -> tuple[Tensor, int, dict]:
  """(the whole file as a 1-d uint8 tensor, where the data area starts, the parsed header with `__metadata__`), as
  tinygrad returns it; `t` is a path, the file's bytes or a 1-d uint8 Tensor of them; the header is checked in full
  (STATE.SAFETENSORS.load)."""
  raw = _file_bytes(t)
  start, header = _parse(raw)
  return _from_bytes(raw, dtypes.uint8, (len(raw),)), start, header


def safe_load(fn) -> dict[str, Tensor]:
  """The tensors of a safetensors file (a path, its bytes, or a 1-d uint8 Tensor of them), by name in header order,
  each holding the file's exact bits on the default device (STATE.SAFETENSORS.load)."""
  raw = _file_bytes(fn)
  start, header = _parse(raw)
  out: dict[str, Tensor] = {}
  for name, entry in header.items():
    if name == "__metadata__": continue
    dtype, (begin, end) = safe_dtypes[entry["dtype"]], entry["data_offsets"]
    data = raw[start + begin:start + end]   # a memoryview slice: no copy until the device's copyin
    if dtype == dtypes.bool and np.frombuffer(data, np.uint8).max(initial=0) > 1:
      raise SpecValueError("STATE.SAFETENSORS.data", f"BOOL tensor {name!r} holds a byte other than 0 or 1")
    out[name] = _from_bytes(_swap_to(data, dtype), dtype, tuple(entry["shape"]))
  return out


def _file_bytes(path_or_bytes) -> memoryview:
  if isinstance(path_or_bytes, (bytes, bytearray, memoryview)): return memoryview(path_or_bytes).cast("B")
  if isinstance(path_or_bytes, Tensor):
    if path_or_bytes.dtype != dtypes.uint8 or path_or_bytes.ndim != 1:
      raise SpecTypeError("STATE.SAFETENSORS.load", f"a file given as a Tensor must be 1-d uint8, not "
                      f"{path_or_bytes.shape} {path_or_bytes.dtype!r}")
    return memoryview(_tensor_bytes(path_or_bytes))
  with open(os.fspath(path_or_bytes), "rb") as f: return memoryview(f.read())


def _parse(raw: memoryview) -> tuple[int, dict]:
  """Check a whole safetensors file's header against spec/state.md; (start of the data area, header)."""
  if len(raw) < 8:
    raise SpecValueError("STATE.SAFETENSORS.layout",
                         f"the file has {len(raw)} bytes, fewer than the 8 of the header length")
  n = int.from_bytes(raw[:8], "little")
  if n > len(raw) - 8:
    raise SpecValueError("STATE.SAFETENSORS.layout", f"the header length {n} runs past the end of the file "
                    f"({len(raw)} bytes): not a safetensors file, or a truncated one")
  header = _parse_json(bytes(raw[8:8 + n]))
  data_len = len(raw) - 8 - n
  ranges = []
  for name, entry in header.items():
    if name == "__metadata__": _check_metadata(entry)
    else: ranges.append((*_check_entry(name, entry, data_len), name))
  cursor = 0
  for begin, end, name in sorted(ranges):   # STATE.SAFETENSORS.offsets: the ranges tile the data area exactly
    if begin != cursor:
      what = "overlaps the tensor before it" if begin < cursor else f"leaves a gap of {begin - cursor} bytes before it"
      raise SpecValueError("STATE.SAFETENSORS.offsets", f"tensor {name!r} at bytes [{begin}, {end}) {what}")
    cursor = end
  if cursor != data_len:
    raise SpecValueError("STATE.SAFETENSORS.offsets", f"{data_len - cursor} bytes after the last tensor's data")
  return 8 + n, header


def _parse_json(text: bytes) -> dict:
  def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
      raise SpecValueError("STATE.SAFETENSORS.header",
                           f"duplicate keys {sorted({k for k in keys if keys.count(k) > 1})}")
    return dict(pairs)
  try:
    if not text.startswith(b"{"): raise ValueError("it does not start with '{'")
    header = json.loads(text.decode("utf-8"), object_pairs_hook=no_duplicates)
  except SpecError: raise
  except ValueError as e:   # UnicodeDecodeError and json.JSONDecodeError are both ValueErrors
    raise SpecValueError("STATE.SAFETENSORS.header", f"the header is not a JSON object: {e}") from None
  if not isinstance(header, dict): raise SpecValueError("STATE.SAFETENSORS.header", "the header is not a JSON object")
  return header


def _check_entry(name: str, entry, data_len: int) -> tuple[int, int]:
  """Check one tensor's header entry (STATE.SAFETENSORS.header/dtype/shape); its (begin, end) byte range."""
  if not isinstance(entry, dict) or set(entry) != _ENTRY_FIELDS:
    raise SpecValueError("STATE.SAFETENSORS.header", f"tensor {name!r} must have exactly the fields dtype, shape and "
                    f"data_offsets, got {entry!r}")
  code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
  if code not in safe_dtypes:
    raise SpecValueError("STATE.SAFETENSORS.dtype", f"tensor {name!r} has dtype {code!r}; known: {sorted(safe_dtypes)}")
  if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
    raise SpecValueError("STATE.SAFETENSORS.header",
                         f"tensor {name!r} has shape {shape!r}, not a list of integers >= 0")
  if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
          and 0 <= offsets[0] <= offsets[1]):
    raise SpecValueError("STATE.SAFETENSORS.header", f"tensor {name!r} has data_offsets {offsets!r}, not [begin, end] "
                    "with 0 <= begin <= end")
  begin, end = offsets
  if end > data_len:
    raise SpecValueError("STATE.SAFETENSORS.offsets", f"tensor {name!r} at bytes [{begin}, {end}) runs past the end of "
                    f"the data area ({data_len} bytes)")
  if end - begin != math.prod(shape) * safe_dtypes[code].itemsize:
    raise SpecValueError("STATE.SAFETENSORS.shape", f"tensor {name!r} of shape {shape} and dtype {code} needs "
                    f"{math.prod(shape) * safe_dtypes[code].itemsize} bytes, its data_offsets give {end - begin}")
  return begin, end


# ---- files as tensors: TensorIO, archives, torch files ----

class TensorIO(io.RawIOBase):
  """A read-only, seekable binary file over the bytes of a 1-d uint8 tensor (STATE.IO): what zipfile, tarfile and
  pickle read. The tensor's bytes are copied out of the device once, at the first read."""

  def __init__(self, t: Tensor):
    if not isinstance(t, Tensor) or t.ndim != 1 or t.dtype != dtypes.uint8:
      raise SpecTypeError("STATE.IO", f"TensorIO needs a 1-d uint8 Tensor, got {getattr(t, 'shape', t)!r} "
                      f"{getattr(t, 'dtype', '')!r}")
    super().__init__()
    self._tensor, self._position, self._data = t, 0, None

  def _bytes(self) -> bytes:
    if self._data is None: self._data = _tensor_bytes(self._tensor)
    return self._data

  def readable(self) -> bool: return True
  def seekable(self) -> bool: return True
  def writable(self) -> bool: return False

  def readinto(self, buffer) -> int:
    """Copy up to len(buffer) bytes from the current position; 0 at the end."""
    chunk = self._bytes()[self._position:self._position + len(buffer)]
    memoryview(buffer).cast("B")[:len(chunk)] = chunk
    self._position += len(chunk)
    return len(chunk)

  def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
    """Move to offset (from the start, the current position or the end), clamped to [0, size]."""
    base = (0, self._position, len(self._tensor))[whence]
    self._position = min(len(self._tensor), max(0, base + offset))
    return self._position

  def tell(self) -> int: return self._position


def accept_filename(func: Callable) -> Callable:
  """Decorate a function of a 1-d uint8 Tensor so it also takes a path (str or pathlib.Path), whose bytes become that
  tensor on the default device (STATE.IO.filename)."""
  @functools.wraps(func)
  def wrapper(fn):
    if isinstance(fn, Tensor): return func(fn)
    with open(os.fspath(pathlib.Path(fn)), "rb") as f: raw = f.read()
    return func(_from_bytes(raw, dtypes.uint8, (len(raw),)))
  return wrapper


@accept_filename
def tar_extract(t: Tensor) -> dict[str, Tensor]:
  """The regular files of a tar archive, name -> 1-d uint8 tensor of the file's bytes (a slice of `t`)
  (STATE.ARCHIVE.tar)."""
  try:
    with tarfile.open(fileobj=TensorIO(t), mode="r") as tar:
      return {m.name: t[m.offset_data:m.offset_data + m.size] for m in tar if m.isreg()}
  except tarfile.TarError as e: raise SpecValueError("STATE.ARCHIVE.tar", f"not a readable tar archive: {e}") from None


@accept_filename
def zip_extract(t: Tensor) -> dict[str, Tensor]:
  """The files of a zip archive, name -> 1-d uint8 tensor of the file's bytes: a slice of `t` for a stored file, the
  decompressed bytes for a deflated one; other compressions are refused (STATE.ARCHIVE.zip)."""
  raw = TensorIO(t)
  try: archive = zipfile.ZipFile(raw, "r")
  except zipfile.BadZipFile as e: raise SpecValueError("STATE.ARCHIVE.zip", f"not a zip archive: {e}") from None
  data, files = raw._bytes(), {}
  with archive:
    for info in archive.infolist():
      # the data starts after the local header: 30 bytes, then the name and the extra field, whose lengths the
      # local header holds (they may differ from the central directory's)
      name_len, extra_len = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
      start = info.header_offset + 30 + name_len + extra_len
      body = t[start:start + info.compress_size]
      if info.compress_type == zipfile.ZIP_STORED: files[info.filename] = body
      elif info.compress_type == zipfile.ZIP_DEFLATED:
        out = zlib.decompress(data[start:start + info.compress_size], -15)
        files[info.filename] = _from_bytes(out, dtypes.uint8, (len(out),))
      else: raise SpecValueError("STATE.ARCHIVE.zip", f"{info.filename}: compression {info.compress_type} is not read")
  return files


@accept_filename
def torch_load(t: Tensor) -> dict[str, Tensor]:
  """The state dict of a torch .pth file (torch.save's zip format or its legacy format), without torch: every
  tensor a realized Tensor with torch's dtype, shape and values (STATE.TORCH)."""
  return torch_load_bytes(TensorIO(t)._bytes())
