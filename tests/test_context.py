"""The package's other names (spec/api.md): getenv (API.GETENV), Context (API.CONTEXT), GlobalCounters
(API.COUNTERS), Variable (API.VARIABLE) and UOp.const (API.UOP.const)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import refimpl
from refimpl import Context, GlobalCounters, Tensor, UOp, Variable, dtypes, getenv
from refimpl.codegen.search import choose_opts
from refimpl.helpers import SpecError
from refimpl.uop import Ops


def test_getenv_reads_converts_and_caches(monkeypatch):
  """API.GETENV: the variable converted to default's type, the default when unset; cached until cache_clear."""
  monkeypatch.setenv("TINYSPEC_TEST_KNOB", "7")
  getenv.cache_clear()
  assert getenv("TINYSPEC_TEST_KNOB") == 7 and getenv("TINYSPEC_TEST_KNOB", "") == "7"
  assert getenv("TINYSPEC_TEST_UNSET_KNOB", 3) == 3
  monkeypatch.setenv("TINYSPEC_TEST_KNOB", "8")
  assert getenv("TINYSPEC_TEST_KNOB") == 7   # cached, as tinygrad's functools.cache
  getenv.cache_clear()
  assert getenv("TINYSPEC_TEST_KNOB") == 8


def test_context_sets_knobs_for_the_block_and_restores_them(monkeypatch):
  """API.CONTEXT: the knob is seen by getenv inside the block (even after a cached read), restored after it (an
  unset one unset again), also when the block raises; nesting works; bools become 1/0."""
  monkeypatch.setenv("DEBUG", "0")
  monkeypatch.delenv("NOOPT", raising=False)
  getenv.cache_clear()
  assert getenv("DEBUG") == 0
  with Context(DEBUG=3, NOOPT=True):
    assert getenv("DEBUG") == 3 and getenv("NOOPT") == 1
    with Context(DEBUG=1): assert getenv("DEBUG") == 1
    assert getenv("DEBUG") == 3
  assert getenv("DEBUG") == 0 and "NOOPT" not in os.environ
  with pytest.raises(ZeroDivisionError), Context(DEBUG=2): 1 / 0
  assert getenv("DEBUG") == 0
  with pytest.raises(SpecError, match="API.CONTEXT"): Context(DEBUG=1.5)


def test_context_changes_what_realize_does(capsys, monkeypatch):
  """API.CONTEXT: DEBUG=2 inside the block prints each kernel, outside it does not; NOOPT=1 inside the block
  turns the optimisation pass off for a kernel it would otherwise optimise; also as a decorator."""
  monkeypatch.delenv("DEBUG", raising=False)
  monkeypatch.delenv("NOOPT", raising=False)
  getenv.cache_clear()
  x = Tensor(np.arange(64, dtype=np.float32)).realize()
  capsys.readouterr()
  with Context(DEBUG=2): (x + 1).realize()
  assert "kernel" in capsys.readouterr().out
  (x + 2).realize()
  assert capsys.readouterr().out == ""

  import refimpl.engine.realize as realize
  chosen = []
  monkeypatch.setattr(realize, "choose_opts", lambda device, ast: chosen.append(choose_opts(device, ast)) or chosen[-1])
  with Context(NOOPT=1): (x.reshape(8, 8) * 3).sum(1).realize()
  (x.reshape(8, 8) * 4).sum(1).realize()
  assert chosen[0] is None and chosen[1] is not None   # NOOPT=1: no options at all (EXEC.OPT)

  @Context(DEBUG=2)
  def run(): (x * 5).realize()
  run()
  assert "kernel" in capsys.readouterr().out


def test_global_counters_count_a_known_kernel():
  """API.COUNTERS, .ops, .mem: (a * 2 + 1).sum(1) over a realized float32 (3, 4) tensor is one kernel of 36 ALU
  ops (a multiply and an add per element, one add per element into the sum) over 48 + 12 bytes; reset() zeroes."""
  a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
  GlobalCounters.reset()
  assert (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem) == (0, 0, 0)
  assert GlobalCounters.time_sum_s == 0.0
  out = (a * 2 + 1).sum(1).realize()
  assert out.tolist() == [16.0, 48.0, 80.0]
  assert GlobalCounters.kernel_count == 1 and GlobalCounters.global_ops == 36 and GlobalCounters.global_mem == 60
  assert GlobalCounters.time_sum_s > 0
  (a + 1).realize()   # 12 adds, 48 bytes in and 48 out
  assert GlobalCounters.kernel_count == 2 and GlobalCounters.global_ops == 48 and GlobalCounters.global_mem == 156
  GlobalCounters.reset()
  assert GlobalCounters.kernel_count == 0 and GlobalCounters.global_ops == 0


def test_variable_bind_and_value():
  """API.VARIABLE, .bind, .value: a DEFINE_VAR; bind checks the bounds; a bound variable is its int, in shapes and
  slices; an unbound one is no int."""
  v = Variable("i", 1, 10)
  assert v.op is Ops.DEFINE_VAR and v.arg == ("i", 1, 10) and v.dtype == dtypes.int32
  b = v.bind(3)
  assert b.op is Ops.BIND and b.unbind() == (v, 3) and int(b) == 3 and int(b * 4 + 1) == 13
  assert Tensor.ones(b, 4).shape == (3, 4) and Tensor.arange(10)[:b].tolist() == [0, 1, 2]
  assert Tensor.ones(10, 4)[:b].reshape(b * 4).shape == (12,)
  with pytest.raises(TypeError, match="API.VARIABLE.value"): int(v)
  with pytest.raises(SpecError, match="API.VARIABLE.bind"): v.bind(11)
  with pytest.raises(SpecError, match="API.VARIABLE.bind"): v.bind(2.0)
  with pytest.raises(SpecError, match="API.VARIABLE"): Variable("j", 0, 8, multiple_of=2)
  with pytest.raises(SpecError, match="API.VARIABLE"): Variable("j", 5, 1)


def test_uop_const_without_device_in_both_orders():
  """API.UOP.const: refimpl's (dtype, value) and tinygrad's (value, dtype=None) give the kernel-level CONST."""
  assert UOp.const(dtypes.float32, 2) is UOp(Ops.CONST, dtypes.float32, (), 2.0)
  assert UOp.const(3, dtypes.int64) is UOp.const(dtypes.int64, 3)
  assert UOp.const(1.5).dtype == dtypes.default_float and UOp.const(True).dtype == dtypes.bool
  assert UOp.const(dtypes.int32, 1, "PYTHON").src[0].op is Ops.DEVICE
  assert refimpl.UOp is UOp
