"""The adapter interface: everything the conformance suite asks of an implementation.

The suite never imports an implementation directly. It builds input tensors, evaluates the catalogue's call
expressions (`x.exp()`, `x.sum(axis, keepdim)`, ...) in the adapter's namespace, differentiates, and reads results back
as numpy arrays, all through an `Adapter`. refimpl's adapter is `conformance.adapters.refimpl:RefimplAdapter`; any
other implementation of the same tinygrad-style API plugs in with `pytest --pyargs conformance --impl module:Class`
(docs/adapter.md, the page a backend author reads; examples/minimal_adapter is a complete one).

Dtypes travel as names ('float32', 'bfloat16', 'int8', 'bool', ...); bfloat16 values travel as float32 arrays.

A failure ends with a reproduction written in the implementation's own API through the `repro_*` methods
(`repro_prelude` above all: the imports and the device), which asserts the expected value (CONF.REPRO).
"""
from __future__ import annotations

import functools
import importlib
import sys
import types
from typing import Any

import numpy as np

__all__ = ["Adapter", "compiled", "load_adapter"]


class Adapter:
  """Base class of adapters. Subclasses implement the methods that raise NotImplementedError; the others have
  defaults that say 'supported' or 'not available'."""
  name = "?"

  def __init__(self, backend: str):
    self.backend = backend

  def describe(self) -> dict[str, Any]:
    """Facts about the implementation and its device for the run metadata of the reports (CONF.REPORT.meta):
    `name`, `version` (None: the version of the distribution that ships the adapter's module) and `device`, a dict
    of what identifies the device (model, driver, compiler). Called once, at the end of a run, on the controller."""
    return {"name": self.name, "version": getattr(self, "version", None), "device": {"backend": self.backend}}

  # ---- what the implementation supports ----
  def unsupported_dtype(self, dtype: str) -> str | None:
    """None when the backend computes in `dtype`, else a reason naming DEV.DTYPE (the test is skipped)."""
    return None

  def unsupported(self, op_name: str) -> str | None:
    """None when the implementation has the catalogue op `op_name`, else the reason it is skipped."""
    return None

  # ---- data ----
  def namespace(self) -> dict[str, Any]:
    """Names the catalogue's call expressions may use besides the inputs and parameters: at least `Tensor` (the
    tensor class, for static creation methods) and `dtypes` (with attributes float32, int8, ...). The layer and
    optimizer tests (conformance/tests/test_layers.py, test_optimizers.py) also use `nn` (the module of layer
    classes: nn.Linear, nn.Conv2d, ...) and `optim` (nn.optim: SGD, Adam, ...); without them those tests are skipped,
    naming the missing name."""
    raise NotImplementedError

  def tensor(self, array: np.ndarray, dtype: str) -> Any:
    """A tensor on this adapter's backend holding `array`'s values in `dtype`."""
    raise NotImplementedError

  def numpy(self, t: Any) -> np.ndarray:
    """A tensor's values (runs whatever is pending); bfloat16 as float32."""
    raise NotImplementedError

  def shape(self, t: Any) -> tuple[int, ...]:
    """A tensor's shape, without running anything (realizing a tensor can cut it off from the graph that
    differentiation needs)."""
    return tuple(t.shape)

  def dtype_name(self, t: Any) -> str:
    """A tensor's dtype as a name: 'float32', 'int8', 'bool', ..."""
    raise NotImplementedError

  def is_tensor(self, v: Any) -> bool:
    """Whether `v` is one of this implementation's tensors (results may also be tuples of them, or Python values)."""
    raise NotImplementedError

  def evaluate(self, expr: str, inputs: dict[str, Any], params: dict[str, Any]) -> Any:
    """Evaluate a catalogue call expression with the input tensors and parameters bound to their names."""
    return eval(compiled(expr), {"__builtins__": __builtins__, **self.namespace()}, {**params, **inputs})  # noqa: S307

  def other_device(self) -> str | None:
    """A device other than this adapter's backend that tensors can be copied to with `t.to(name)` (UOP.COPY.to), or
    None when the implementation has none (tests of copies are then skipped)."""
    return None

  # ---- autograd ----
  def gradient(self, y: Any, xs: list[Any], cotangent: Any) -> list[Any]:
    """The vector-Jacobian product of y with respect to each of xs for the cotangent (a tensor shaped like y), as
    tensors that can themselves be differentiated (GRAD.MODEL)."""
    raise NotImplementedError

  # ---- the UOp level ----
  def alu(self, op: str, out_dtype: str, operands: list[tuple[np.ndarray, str]]) -> np.ndarray:
    """Run ALU op `op` (an `Ops` name such as 'ADD', 'CAST') elementwise on equal-shape operands given as (array,
    dtype) pairs, with result dtype `out_dtype`, on the backend; the result as a numpy array. Raise
    NotImplementedError when the implementation has no way to run a single ALU op."""
    raise NotImplementedError

  # ---- reproductions (CONF.REPRO): Python source in the implementation's own API ----
  def repro_prelude(self) -> list[str]:
    """The lines every reproduction starts with (after `import numpy as np`): the imports that give `Tensor` and
    `dtypes` their meaning in this implementation, and whatever selects the backend under test, so that a pasted
    reproduction runs this implementation on this backend and nothing else. Default: each name of `namespace()`
    imported from the module that defines it; override it to select the device (refimpl's adapter adds
    `Device.DEFAULT = ...`) or when a name is not importable as such."""
    lines = []
    for name, obj in self.namespace().items():
      if isinstance(obj, types.ModuleType): lines.append(f"import {obj.__name__} as {name}")
      elif getattr(sys.modules.get(getattr(obj, "__module__", "") or ""), name, None) is obj:
        lines.append(f"from {obj.__module__} import {name}")
      else: lines.append(f"# {name}: not importable by name; override {type(self).__name__}.repro_prelude")
    return lines

  def repro_numpy(self, tensor: str) -> str:
    """Python source reading the tensor named `tensor` as a numpy array, as `numpy` does: `tensor.numpy()`."""
    return f"{tensor}.numpy()"

  def repro_tensor(self, array: str, dtype: str) -> str:
    """Python source of an input tensor in a reproduction, made as `tensor` makes it, from `array` (source of a
    numpy array) in `dtype`."""
    return f"Tensor({array}, dtype={dtype!r})"

  def repro_alu(self, op: str, out_dtype: str, srcs: str) -> list[str]:
    """The lines of a reproduction that run ALU op `op` once on the source UOps `srcs` (Python source of a tuple of
    the inputs' UOps) with result dtype `out_dtype` and print the result; refimpl's UOp API by default."""
    return [f"from refimpl.uop import Ops; from refimpl.uop.ops import UOp  # ALU op {op} at the UOp level",
            f"out = Tensor(UOp(Ops.{op}, dtypes.{out_dtype}, {srcs}))", "print(out.numpy())"]

  # ---- layers and optimizers (conformance/tests/test_layers.py, test_optimizers.py) ----
  def train(self, mode: bool) -> Any:
    """A context manager inside which layers behave as in training (`mode` True) or in evaluation (NN.LAYER): by
    default tinygrad's `Tensor.train(mode)`."""
    return self.namespace()["Tensor"].train(mode)

  def set_parameter(self, layer: Any, name: str, t: Any) -> None:
    """Make tensor `t` the layer's parameter or statistic called `name` (weight, bias, running_mean, ...; NN.LAYER):
    by default the attribute of that name, as tinygrad and refimpl keep them."""
    setattr(layer, name, t)

  def step(self, optimizer: Any) -> None:
    """One optimizer update from the parameters' gradients (OPTIM.STEP): by default `optimizer.step()`."""
    optimizer.step()

  def set_lr(self, optimizer: Any, lr: float) -> None:
    """Change the learning rate between steps (OPTIM.LR): by default an in-place assign to `optimizer.lr`, a tensor of
    one element, realized at once; an OptimizerGroup's (`optimizers`, OPTIM.GROUP) is each member's."""
    for member in getattr(optimizer, "optimizers", ()):
      self.set_lr(member, lr)
    if hasattr(optimizer, "optimizers"): return
    old = optimizer.lr
    value = np.full(self.shape(old), lr, dtype=np.float64 if self.dtype_name(old) == "float64" else np.float32)
    old.assign(self.tensor(value, self.dtype_name(old))).realize()

  def repro_imports(self) -> list[str]:
    """The lines a layer or optimizer reproduction adds to its prelude to name `nn` and `optim`."""
    return ["from refimpl import nn", "from refimpl.nn import optim"]

  def repro_train(self, mode: bool) -> str:
    """Python source of the context manager `train(mode)` makes, for reproductions."""
    return f"Tensor.train({mode})"

  # ---- kernels ----
  def count_kernels(self, t: Any) -> int | None:
    """How many kernels realizing `t` would run, or None when the implementation cannot say."""
    return None

  # ---- devices and isolation (CONF.DEVICES, CONF.PROGRAM.crash) ----
  def devices(self) -> list[str]:
    """The devices of this implementation whose results the suite compares with each other (CONF.DEVICES), the
    backend under test first. Default: only the backend under test, so there is nothing to compare."""
    return [self.backend]

  def isolation(self, device: str) -> str | None:
    """How random programs run on `device` (CONF.PROGRAM.crash): None in the test's own process, or 'fork' /
    'spawn': in a helper process started that way (with an adapter of its own, made by `load_adapter`), so that a
    kernel that kills its process fails one example, naming the signal, instead of ending the test run. Default:
    None for the backend under test, 'spawn' for any other device (a helper has that device as its default)."""
    return None if device == self.backend else "spawn"


@functools.cache
def compiled(expr: str):
  """A catalogue expression compiled once (the suite evaluates each many times)."""
  return compile(expr, f"<{expr}>", "eval")


def load_adapter(spec: str, backend: str) -> Adapter:
  """The adapter named by 'module:Class' (as `--impl` gives it), made for `backend`."""
  module, _, cls = spec.partition(":")
  if not cls: raise ValueError(f"--impl wants module:Class, got {spec!r}")
  found = getattr(importlib.import_module(module), cls, None)
  if found is None: raise ValueError(f"--impl {spec}: module {module} has no {cls}")
  # checked before it is called: a class that is no adapter may not even take a backend name
  if not (isinstance(found, type) and issubclass(found, Adapter)):
    raise TypeError(f"--impl {spec} is not a conformance.adapters.Adapter subclass")
  adapter = found(backend)
  if not isinstance(adapter, Adapter): raise TypeError(f"{spec} is not a conformance.adapters.Adapter")
  return adapter
