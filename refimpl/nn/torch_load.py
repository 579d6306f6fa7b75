"""Reading torch's .pth files without torch (STATE.TORCH): `torch.save`'s zip format and its legacy format (a run of
pickles followed by the raw storages). The pickle is read by an unpickler that builds only containers, storages and
tensors, and refuses every other global (STATE.TORCH.pickle); each tensor becomes a realized refimpl Tensor holding
exactly the bytes torch wrote, read through its storage offset and strides (STATE.TORCH.view)."""
from __future__ import annotations

import collections
import io
import math
import pickle
import struct
import zipfile

import numpy as np

from refimpl.dtype import DType, dtypes
from refimpl.helpers import SpecValueError

# STATE.TORCH.dtype: torch's storage classes in the pickle, by name
TORCH_STORAGES: dict[str, DType] = {
  "DoubleStorage": dtypes.float64, "FloatStorage": dtypes.float32, "HalfStorage": dtypes.float16,
  "BFloat16Storage": dtypes.bfloat16, "LongStorage": dtypes.int64, "IntStorage": dtypes.int32,
  "ShortStorage": dtypes.int16, "CharStorage": dtypes.int8, "ByteStorage": dtypes.uint8, "BoolStorage": dtypes.bool}
LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class _Storage:
  """A torch storage named in the pickle: its element type, its key, its element count; `data` (its elements as
  unsigned integers of the same width, so bfloat16 travels untouched) once read."""
  def __init__(self, dtype: DType, key: str, numel: int):
    self.dtype, self.key, self.numel, self.data = dtype, key, numel, None


class _Pending:
  """A tensor torch's pickle asked for, built once the storages are read (legacy files store them after the pickle)."""
  def __init__(self, storage: _Storage, offset: int, size: tuple[int, ...], stride: tuple[int, ...]):
    self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)


def _rebuild_tensor(storage, storage_offset, size, stride, *_ignored):
  if not isinstance(storage, _Storage): raise SpecValueError("STATE.TORCH.pickle",
                                                             "a tensor whose storage is not a storage")
  return _Pending(storage, storage_offset, size, stride)


def _rebuild_parameter(data, *_ignored):   # nn.Parameter: the tensor itself (requires_grad and hooks are dropped)
  return data


_GLOBALS = {("collections", "OrderedDict"): collections.OrderedDict,
            ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
            ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
            ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter}


class _TorchUnpickler(pickle.Unpickler):
  """STATE.TORCH.pickle: only the globals above and torch's storage classes; persistent ids name storages."""
  def __init__(self, f, storages: dict[str, _Storage]):
    super().__init__(f)
    self.storages = storages

  def find_class(self, module: str, name: str):
    if module == "torch" and name in TORCH_STORAGES: return TORCH_STORAGES[name]
    if (module, name) in _GLOBALS: return _GLOBALS[(module, name)]
    raise SpecValueError("STATE.TORCH.pickle", f"the pickle names {module}.{name}, which torch_load does not build "
                    "(only state dicts of tensors: dicts, lists, tuples, numbers, strings, tensors)")

  def persistent_load(self, pid):
    # ('storage', storage class, key, location, element count[, view metadata of very old files])
    if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and isinstance(pid[1], DType)):
      raise SpecValueError("STATE.TORCH.pickle", f"unknown persistent id {pid!r}")
    key = str(pid[2])
    if key not in self.storages: self.storages[key] = _Storage(pid[1], key, int(pid[4]))
    return self.storages[key]


def torch_load_bytes(raw: bytes | memoryview) -> dict:
  """The object a .pth file holds (a state dict), with every tensor a refimpl Tensor (STATE.TORCH)."""
  raw = bytes(raw)
  storages: dict[str, _Storage] = {}
  if zipfile.is_zipfile(io.BytesIO(raw)):   # STATE.TORCH.zip
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
      names = z.namelist()
      pkl = next((n for n in names if n.endswith("/data.pkl") or n == "data.pkl"), None)
      if pkl is None: raise SpecValueError("STATE.TORCH.zip", "the zip archive has no data.pkl: not a torch.save file")
      base = pkl[:-len("data.pkl")]
      if f"{base}byteorder" in names and z.read(f"{base}byteorder").strip() not in (b"little", b""):
        raise SpecValueError("STATE.TORCH.zip", "only little-endian files are read")
      obj = _TorchUnpickler(io.BytesIO(z.read(pkl)), storages).load()
      for key, s in storages.items():
        name = f"{base}data/{key}"
        if name not in names: raise SpecValueError("STATE.TORCH.zip", f"storage {key} has no file {name}")
        _fill(s, z.read(name))
  else:   # STATE.TORCH.legacy: magic, protocol, sys info, the object, the storage keys, then each storage
    f = io.BytesIO(raw)
    try: magic = pickle.load(f)
    except Exception: magic = None
    if magic != LEGACY_MAGIC:
      raise SpecValueError("STATE.TORCH.format", "neither a zip archive nor torch's legacy format (wrong magic number)")
    pickle.load(f), pickle.load(f)   # protocol version, sys info: plain values
    obj = _TorchUnpickler(f, storages).load()
    keys = pickle.load(f)
    for key in keys:
      s = storages[str(key)]
      (numel,) = struct.unpack("<q", f.read(8))
      _fill(s, f.read(numel * s.dtype.itemsize))
  return _resolve(obj)


def _fill(s: _Storage, data: bytes) -> None:
  if len(data) < s.numel * s.dtype.itemsize:
    raise SpecValueError("STATE.TORCH.view",
                         f"storage {s.key} holds {len(data)} bytes, fewer than its {s.numel} elements")
  s.data = np.frombuffer(data, _UINT[s.dtype.itemsize], s.numel)


def _resolve(obj):
  """obj with every _Pending replaced by its Tensor, containers rebuilt alike."""
  if isinstance(obj, _Pending): return _tensor(obj)
  if isinstance(obj, dict): return type(obj)((k, _resolve(v)) for k, v in obj.items())
  if isinstance(obj, (list, tuple)): return type(obj)(_resolve(v) for v in obj)
  return obj


def _tensor(p: _Pending):
  """STATE.TORCH.view: the elements at offset + sum(index * stride) of the storage, in row-major order."""
  from refimpl.nn.state import _from_bytes
  s = p.storage
  if s.data is None: raise SpecValueError("STATE.TORCH.view", f"storage {s.key} is named but never stored")
  if len(p.size) != len(p.stride) or p.offset < 0 or any(n < 0 for n in p.size):
    raise SpecValueError("STATE.TORCH.view", f"bad view: size {p.size}, stride {p.stride}, offset {p.offset}")
  if math.prod(p.size) > 0:
    lo = p.offset + sum((n - 1) * st for n, st in zip(p.size, p.stride) if st < 0)
    hi = p.offset + sum((n - 1) * st for n, st in zip(p.size, p.stride) if st > 0)
    if lo < 0 or hi >= s.numel:
      raise SpecValueError("STATE.TORCH.view", f"a view (size {p.size}, stride {p.stride}, offset {p.offset}) reads "
                      f"outside storage {s.key} of {s.numel} elements")
  item = s.data.itemsize
  elems = np.lib.stride_tricks.as_strided(s.data[p.offset:] if math.prod(p.size) else s.data[:0], shape=p.size,
                                          strides=tuple(st * item for st in p.stride), writeable=False)
  return _from_bytes(np.ascontiguousarray(elems).tobytes(), s.dtype, p.size)
