"""The tinygrad adapter: the conformance suite as an oracle for tinygrad (tested with 0.14.0 from PyPI).

    pip install -e '.[tinygrad]'      # tinygrad==0.14.0; its CPU device compiles with clang (apt-get install clang)
    pytest conformance -n 2 --impl conformance.adapters.tinygrad:TinygradAdapter --backend CPU

tinygrad is imported when the adapter is made (so the suite does not need it otherwise); `--backend` names a tinygrad
device (CPU, PYTHON, CL, CUDA, ...), made the default with `DEV.value` (tinygrad 0.14 refuses `Device.DEFAULT = ...`).
Single ALU ops run as tinygrad UOps of the same name where tinygrad has one. docs/tinygrad-conformance.md has the
results, each failure classified.

Integer division by zero (and INT_MIN / -1) is C's undefined behaviour in tinygrad's compiled kernels: on x86 the CPU
device's process dies with SIGFPE, which would take the test worker with it. So a tensor whose graph divides integers
is realized in a helper process (`_Isolated`), and the death of that process becomes an exception: a failure of that
one example, with hypothesis's shrinking and a reproduction, instead of a lost worker.
"""
from __future__ import annotations

import multiprocessing
import pickle
import signal
from typing import Any

import numpy as np

from conformance.adapters.base import Adapter

__all__ = ["TinygradAdapter"]

# tinygrad 0.14's UOps that divide: C's `/` and `%` on integers, and the floor forms lowered to them
_DIVISIONS = ("CDIV", "CMOD", "FLOORDIV", "FLOORMOD", "IDIV", "MOD")
# UOps that tinygrad 0.14 makes only while rendering a kernel (MULACC is fused from a*b+c when the renderer has it):
# a Tensor graph cannot hold them, so the suite cannot run them one at a time
_CODEGEN_ONLY = ("MULACC",)
_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
           "float32", "float64")


class TinygradAdapter(Adapter):
  """tinygrad's Tensor on the tinygrad device named by `backend`."""
  name = "tinygrad"

  def __init__(self, backend: str):
    super().__init__(backend)
    from importlib.metadata import version

    import tinygrad
    from tinygrad import Device, Tensor, dtypes, nn
    from tinygrad.uop.ops import Ops, UOp
    self.version = version("tinygrad")   # tinygrad 0.14 has no __version__
    self.tg, self.Tensor, self.dtypes, self.Ops, self.UOp = tinygrad, Tensor, dtypes, Ops, UOp
    self.nn = nn
    from tinygrad.helpers import DEV
    DEV.value = backend   # tinygrad 0.14 deprecates assigning Device.DEFAULT
    self.device = Device[backend]   # fails early when tinygrad has no such device
    self._dtype = {n: getattr(dtypes, n) for n in _DTYPES}
    self._name = {dt: n for n, dt in self._dtype.items()}
    # tinygrad 0.14: the dtypes a device computes in are its renderer's
    renderer = getattr(self.device, "renderer", None)
    self._supported = set(renderer.supported_dtypes()) if renderer is not None else set(self._dtype.values())
    self._divisions = {getattr(Ops, n) for n in _DIVISIONS if hasattr(Ops, n)}
    self._isolated: _Isolated | None = None
    self._compiles: dict[str, str | None] = {}   # dtype -> _compile_probe's answer, asked once

  def describe(self) -> dict[str, Any]:
    """tinygrad's version, and its device's class, renderer and compiler (CONF.REPORT.meta)."""
    facts = {"backend": self.backend, "class": type(self.device).__name__}
    for part in ("renderer", "compiler"):
      if (obj := getattr(self.device, part, None)) is not None: facts[part] = type(obj).__name__
    return {"name": self.name, "version": self.version, "device": facts}

  def unsupported_dtype(self, dtype: str) -> str | None:
    if self._dtype[dtype] not in self._supported:
      return f"DEV.DTYPE: tinygrad's {self.backend} does not compute in {dtype}"
    if dtype not in self._compiles: self._compiles[dtype] = self._compile_probe(dtype)
    return self._compiles[dtype]

  def _compile_probe(self, dtype: str) -> str | None:
    """None when one small kernel in `dtype` compiles and runs, else why not. The renderer's dtype list does not ask
    the toolchain: tinygrad 0.14's CPU device lists bfloat16 and emits `__bf16` arithmetic, which clang accepts on
    x86-64 only from version 17 on. Without the probe every bfloat16 test fails on a compile error (and hypothesis
    shrinks each for minutes) instead of being skipped with the reason."""
    try:
      t = self.tensor(np.array([1, 0, 1]), dtype)
      self.numpy(t + t)
      return None
    except Exception as e:   # noqa: BLE001 (any failure to build or run the kernel means the same here)
      first = (str(e).strip().splitlines() or [""])[0][:160]
      hint = " (tinygrad's CPU device needs clang >= 17 for __bf16)" if dtype == "bfloat16" else ""
      return (f"DEV.DTYPE: tinygrad's {self.backend} lists {dtype} but a {dtype} kernel fails here{hint}: "
              f"{type(e).__name__}: {first}")

  def unsupported(self, op_name: str) -> str | None:
    if op_name.startswith(("nn.", "optim.")):   # a layer or optimizer entry: its class (or function) by name
      module, _, cls = op_name.partition(".")
      where = self.nn if module == "nn" else self.nn.optim
      return None if hasattr(where, cls.split(".")[0]) else f"tinygrad {self.version} has no {module}.{cls}"
    if op_name.startswith("ALU."):
      if op_name[4:] in _CODEGEN_ONLY: return f"tinygrad {self.version}'s {op_name[4:]} exists only in codegen"
      return None if hasattr(self.Ops, op_name[4:]) else f"tinygrad {self.version} has no UOp {op_name[4:]}"
    from conformance.catalogue import OPS
    missing = [n for n in (OPS[op_name].covers if op_name in OPS else ()) if not hasattr(self.Tensor, n)]
    return f"tinygrad {self.version}'s Tensor has no {', '.join(missing)}" if missing else None

  def namespace(self) -> dict[str, Any]:
    return {"Tensor": self.Tensor, "dtypes": self.dtypes, "nn": self.nn, "optim": self.nn.optim}

  def train(self, mode: bool) -> Any:
    """tinygrad 0.14 reads training mode from the TRAINING context variable (its Tensor has no train())."""
    from tinygrad.helpers import Context
    return Context(TRAINING=int(mode))

  def step(self, optimizer: Any) -> None:
    """tinygrad 0.14's step() refuses to run unless TRAINING is set (refimpl's does not ask, OPTIM.STEP)."""
    with self.train(True): optimizer.step()

  def repro_imports(self) -> list[str]:
    return ["from tinygrad import nn", "from tinygrad.nn import optim", "from tinygrad.helpers import Context"]

  def repro_train(self, mode: bool) -> str:
    return f"Context(TRAINING={int(mode)})"

  def repro_prelude(self) -> list[str]:
    """The lines a reproduction starts with: tinygrad on this device."""
    return ["from tinygrad import Tensor, dtypes", "from tinygrad.helpers import DEV",
            f"DEV.value = {self.backend!r}",
            "def tensor(a, dt):   # as the adapter makes inputs: realized buffers (a 0-d array would be a CONST)",
            "  return Tensor(a.reshape(-1).tolist(), dtype=dt).reshape(a.shape).realize()"]

  def repro_tensor(self, array: str, dtype: str) -> str:
    return f"tensor({array}, {dtype!r})"

  def repro_numpy(self, tensor: str) -> str:
    """As `numpy` reads it: bfloat16 through float32 (numpy has no bfloat16)."""
    return f"({tensor}.cast(dtypes.float32) if {tensor}.dtype == dtypes.bfloat16 else {tensor}).numpy()"

  def tensor(self, array: np.ndarray, dtype: str) -> Any:
    # from a Python list, not a numpy array: tinygrad 0.14 copies numpy arrays in through its CPU device, which
    # compiles helper programs with clang even when the target device is another one. The values are exactly
    # representable in `dtype` (bfloat16 ones arrive as float32), so the list conversion is exact.
    a = np.asarray(array)
    flat = self.Tensor(a.reshape(-1).tolist(), dtype=self._dtype[dtype], device=self.backend)   # 0-d: no CONST
    return flat.reshape(a.shape).realize()

  def numpy(self, t: Any) -> np.ndarray:
    if t.dtype == self.dtypes.bfloat16: t = t.cast(self.dtypes.float32)
    if t.numel() and self._divides_integers(t):   # an empty tensor runs no division (and its buffers do not pickle)
      if self._isolated is None: self._isolated = _Isolated(self.backend)
      return self._isolated.numpy(t.uop)
    return np.asarray(t.numpy())

  def _divides_integers(self, t: Any) -> bool:
    """Whether realizing `t` runs an integer division (a kernel that may trap; see the module docstring)."""
    return any(u.op in self._divisions and self.dtypes.is_int(u.dtype) for u in t.uop.toposort())

  def dtype_name(self, t: Any) -> str:
    # tinygrad 0.14 types results of Python scalars "weak" (weakint, weakfloat, as JAX does); a weak tensor has no
    # storage and is read as its strong dtype (default_int, default_float), the dtype the result actually has
    from tinygrad.dtype import strong_dtype
    dt = strong_dtype(t.dtype)
    return self._name.get(dt, str(dt))

  def is_tensor(self, v: Any) -> bool:
    return isinstance(v, self.Tensor)

  def gradient(self, y: Any, xs: list[Any], cotangent: Any) -> list[Any]:
    return list(y.gradient(*xs, gradient=cotangent))

  def alu(self, op: str, out_dtype: str, operands: list[tuple[np.ndarray, str]]) -> np.ndarray:
    if not hasattr(self.Ops, op) or op in _CODEGEN_ONLY: raise NotImplementedError(self.unsupported(f"ALU.{op}"))
    srcs = tuple(self.tensor(a, dt).uop for a, dt in operands)
    dtype = self._dtype[out_dtype]
    arg = dtype if op in ("CAST", "BITCAST") else None   # tinygrad's CAST carries its target dtype as its arg too
    return self.numpy(self.Tensor(self.UOp(getattr(self.Ops, op), dtype, srcs, arg)))

  def repro_alu(self, op: str, out_dtype: str, srcs: str) -> list[str]:
    """The ALU op as `alu` builds it, with tinygrad's own UOp imports."""
    arg = f", dtypes.{out_dtype}" if op in ("CAST", "BITCAST") else ""
    read = ".cast(dtypes.float32)" if out_dtype == "bfloat16" else ""   # as `numpy` reads bfloat16
    return [f"from tinygrad.uop.ops import Ops, UOp  # ALU op {op} at the UOp level",
            f"out = Tensor(UOp(Ops.{op}, dtypes.{out_dtype}, {srcs}{arg}))", f"print(out{read}.numpy())"]

  def count_kernels(self, t: Any) -> int | None:
    return len(t.schedule()) if hasattr(t, "schedule") else None   # tinygrad 0.14's Tensor has no schedule()


class _Isolated:
  """A helper process that realizes pickled tinygrad UOp graphs on `backend` and sends back their values; when it
  dies (SIGFPE on an integer division by zero), `numpy` raises and the next call starts a new one."""

  def __init__(self, backend: str):
    self.backend = backend
    self.proc: Any = None

  def numpy(self, uop: Any) -> np.ndarray:
    """The values of the tensor with graph `uop`, computed in the helper process."""
    if self.proc is None or not self.proc.is_alive():
      ctx = multiprocessing.get_context("spawn")   # not fork: tinygrad's CPU device has worker threads and shared maps
      self.conn, child = ctx.Pipe()
      self.proc = ctx.Process(target=_serve, args=(child, self.backend), daemon=True)
      self.proc.start()
      child.close()
    try:
      self.conn.send_bytes(pickle.dumps(uop))
      ok, value = pickle.loads(self.conn.recv_bytes())
    except (EOFError, OSError):
      self.proc.join(timeout=10)
      code = self.proc.exitcode
      self.proc = None
      if code == -signal.SIGFPE:
        raise RuntimeError("tinygrad's kernel killed its process with SIGFPE: tinygrad leaves integer division by zero "
                           "and INT_MIN / -1 undefined (C's `/`), and on x86 they trap") from None
      raise RuntimeError(f"the helper process realizing the tensor died (exit code {code})") from None
    if not ok: raise value
    return value


def _serve(conn: Any, backend: str) -> None:
  """The helper process's loop: receive a pickled UOp graph, send back (True, values) or (False, exception)."""
  from tinygrad import Tensor
  from tinygrad.helpers import DEV
  DEV.value = backend
  while True:
    try: data = conn.recv_bytes()
    except EOFError: return
    try: reply = (True, np.asarray(Tensor(pickle.loads(data)).numpy()))
    except Exception as e: reply = (False, e)   # noqa: BLE001 (sent back and raised there)
    try: conn.send_bytes(pickle.dumps(reply))
    except Exception as e: conn.send_bytes(pickle.dumps((False, RuntimeError(f"{type(e).__name__}: {e}"))))
