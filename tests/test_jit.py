"""TinyJit (spec/jit.md): replays give bit-identical results to the plain function, without rescheduling or
recompiling; changed inputs are refused; arguments that share buffers, results fed back in and state updated in
place all stay correct."""
from __future__ import annotations

import numpy as np
import pytest

import refimpl.jit as jitmod
import refimpl.engine.realize as realize_mod
import refimpl.tensor.core as tensor_mod
from refimpl import Device, Tensor, TinyJit, dtypes
from refimpl.helpers import SpecError

CALLS = 10


def _rand(rng, *shape) -> np.ndarray:
  return rng.standard_normal(shape).astype(np.float32)


def _bits(t: Tensor) -> bytes:
  return t.numpy().tobytes()


# ---- the functions under test: elementwise, reductions, matmul, several results ----
def f_elementwise(x, y): return (x * 2.5 + y).relu() - y.exp2()
def f_reduce(x, y): return (x * y).sum(axis=1) + x.max(axis=0).mean()
def f_matmul(x, y): return x @ y.T
def f_multi(x, y): return x + y, {"sum": (x * y).sum(), "max": x.maximum(y).max(axis=1)}, [x.sqrt()]


def _results(ret) -> list[Tensor]:
  """The Tensors of a result in a fixed order."""
  return [t for _, t in jitmod._leaves(ret, "r") if isinstance(t, Tensor)]


@pytest.mark.parametrize("fn", [f_elementwise, f_reduce, f_matmul, f_multi], ids=lambda f: f.__name__)
def test_replays_match_plain_calls(fn):
  """JIT.REPLAY: 10 calls on fresh random inputs give the bytes of the un-jitted function, and the Python function
  itself runs only on calls 1 and 2."""
  rng = np.random.default_rng(1)
  runs = []
  jitted = TinyJit(lambda x, y: runs.append(1) or fn(x, y))
  for i in range(CALLS):
    a, b = np.abs(_rand(rng, 3, 4)), _rand(rng, 3, 4)
    got = [t.numpy() for t in _results(jitted(Tensor(a), Tensor(b)))]   # copied now: replays alias (JIT.OUTPUTS)
    want = [t.numpy() for t in _results(fn(Tensor(a), Tensor(b)))]
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
      assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes(), f"call {i}"
  assert len(runs) == 2 and jitted.cnt == CALLS and len(jitted.captured) >= 1


def test_values_against_numpy():
  """The replayed values are the function's values (checked independently of refimpl's plain path)."""
  rng = np.random.default_rng(2)
  jitted = TinyJit(f_reduce)
  for _ in range(4):
    a, b = _rand(rng, 3, 4), _rand(rng, 3, 4)
    np.testing.assert_allclose(jitted(Tensor(a), Tensor(b)).numpy(), (a * b).sum(1) + a.max(0).mean(), rtol=1e-6)


def test_replay_does_not_schedule_or_compile(monkeypatch):
  """JIT.REPLAY: calls 3+ never kernelize, schedule, run through the realize path or compile."""
  counts = {"kernelize": 0, "schedule": 0, "run_kernels": 0, "compile_kernel": 0}

  def counting(module, name):
    orig = getattr(module, name)
    def wrapper(*a, **k):
      counts[name] += 1
      return orig(*a, **k)
    monkeypatch.setattr(module, name, wrapper)
  for name in ("kernelize", "schedule", "run_kernels"): counting(tensor_mod, name)
  counting(realize_mod, "compile_kernel")
  rng = np.random.default_rng(3)
  jitted = TinyJit(f_multi)
  for i in range(CALLS):
    if i == 2:
      assert all(v > 0 for v in counts.values()), counts   # the counters do see calls 1 and 2
      counts = dict.fromkeys(counts, 0)
    jitted(Tensor(np.abs(_rand(rng, 2, 3))), Tensor(_rand(rng, 2, 3)))
  assert counts == dict.fromkeys(counts, 0)


def test_captured_launches_and_debug_output(monkeypatch, capsys):
  """JIT.CAPTURE: `captured` lists one record per kernel launched on call 2; DEBUG>=1 reports capture and replay."""
  monkeypatch.setattr(jitmod, "getenv", lambda key, default=0: 1 if key == "DEBUG" else default)
  jitted = TinyJit(lambda x: ((x + 1).sum(), x * 3))
  x = Tensor([1.0, 2.0, 4.0])
  for _ in range(3): jitted(x)
  out = capsys.readouterr().out
  assert "JIT captured 2 kernels" in out and "JIT replayed 2 kernels" in out
  assert [ln.out.size for ln in jitted.captured] in ([1, 3], [3, 1])
  assert all(ln.device == x.device for ln in jitted.captured)


def test_lazy_and_keyword_inputs():
  """JIT.INPUTS: lazy and non-contiguous tensor arguments (positional, keyword, inside a list) are realized first."""
  rng = np.random.default_rng(4)
  jitted = TinyJit(lambda xs, scale: (xs[0] * xs[1] + scale).sum(axis=0))
  for _ in range(5):
    a, b, s = _rand(rng, 4, 3), _rand(rng, 3, 4), _rand(rng, 3)
    got = jitted([Tensor(a) + 1, Tensor(b).T], scale=Tensor(s)).numpy()
    want = ((Tensor(a) + 1) * Tensor(b).T + Tensor(s)).sum(axis=0).numpy()
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("change,message", [
  (lambda x, y: (Tensor(np.zeros((3, 5), np.float32)), y), r"args\[0\] changed shape: captured with \(3, 4\), "
   r"called with \(3, 5\)"),
  (lambda x, y: (x, Tensor(np.zeros((3, 4), np.int32))), r"args\[1\] changed dtype: captured with dtypes.float"),
  (lambda x, y: (x,), r"captured with 2 \(args\[0\], args\[1\]\), called with 1 \(args\[0\]\)"),
  (lambda x, y: (x, 2.0), r"captured with 2 .*called with 1"),
])
def test_changed_inputs_are_refused(change, message):
  """JIT.INPUTS: a different shape, dtype or number of tensor arguments after the capture is an error naming it."""
  jitted = TinyJit(lambda *ts: sum(t.float() for t in ts))
  x, y = Tensor(np.ones((3, 4), np.float32)), Tensor(np.ones((3, 4), np.float32))
  for _ in range(3): jitted(x, y)
  with pytest.raises(SpecError, match=message) as e:
    jitted(*change(x, y))
  assert e.value.clause == "JIT.INPUTS"


def test_changed_static_argument_is_refused():
  """JIT.INPUTS: a non-tensor argument was baked into the kernels; a different value is refused, the same accepted."""
  jitted = TinyJit(lambda x, k: x * k)
  x = Tensor([1.0, 2.0])
  for _ in range(3): assert jitted(x, k=3.0).tolist() == [3.0, 6.0]
  with pytest.raises(SpecError, match=r"kwargs\['k'\] is 4.0, it was 3.0"):
    jitted(x, k=4.0)


def test_same_buffer_twice():
  """JIT.INPUTS / JIT.ALIAS: one tensor for two arguments is refused when capturing, and right when replaying."""
  jitted = TinyJit(lambda x, y: x * 2 - y)
  x = Tensor([1.0, 5.0])
  jitted(x, x)
  with pytest.raises(SpecError, match="shares its buffer with args\\[0\\]"):
    jitted(x, x)
  jitted = TinyJit(lambda x, y: x * 2 - y)
  for _ in range(2): jitted(Tensor([1.0, 1.0]), Tensor([2.0, 2.0]))
  assert jitted(x, x).tolist() == [1.0, 5.0]


def test_result_fed_back_in():
  """JIT.ALIAS: `x = step(x)` over 10 calls equals the plain loop, although x is the buffer the replay writes."""
  step = (lambda x: (x * 0.5 + x.sum() * 0.1).sin())
  jitted = TinyJit(step)
  x = y = Tensor(np.linspace(-1, 1, 6, dtype=np.float32))
  for _ in range(CALLS):
    x, y = jitted(x), step(y).realize()
    assert _bits(x) == _bits(y)


def test_result_that_is_an_argument():
  """JIT.OUTPUTS: a result that is (a view of) an argument is the new call's argument on replay."""
  jitted = TinyJit(lambda x, y: (x.reshape(2, 2), x + y))
  for i in range(5):
    a, b = np.arange(4, dtype=np.float32) + i, np.full(4, 10.0 * i, np.float32)
    view, total = jitted(Tensor(a), Tensor(b))
    assert view.numpy().tolist() == a.reshape(2, 2).tolist() and total.numpy().tolist() == (a + b).tolist()


def test_results_alias_between_calls():
  """JIT.OUTPUTS: a replay returns the same Tensor objects, now holding the new values."""
  jitted = TinyJit(lambda x: x + 1)
  outs = [jitted(Tensor([float(i)])) for i in range(4)]
  assert outs[2] is outs[3] and outs[1] is outs[2] and outs[3].tolist() == [4.0]
  assert outs[0].tolist() == [1.0]   # call 1 is a plain call: its result is its own


def test_varying_host_data_is_refused():
  """JIT.CAPTURE: data copied in from the host inside the function that differs between calls 1 and 2 would be stale
  on replay: refused at the capture, whether a kernel reads it or it is a result."""
  rng = np.random.default_rng(8)
  jitted = TinyJit(lambda x: x + Tensor(rng.standard_normal(2).astype(np.float32)))
  x = Tensor([0.0, 0.0])
  jitted(x)
  with pytest.raises(SpecError, match="differ between the first call and the capturing call") as e:
    jitted(x)
  assert e.value.clause == "JIT.CAPTURE"
  jitted = TinyJit(lambda x: (x * 2, Tensor.rand(3)))
  jitted(x)
  with pytest.raises(SpecError, match=r"\(1 and 1 such buffers\)"):
    jitted(x)


def test_constant_host_data_is_replayed():
  """JIT.CAPTURE: host data equal on calls 1 and 2 (literals, arange behind indexing and argmax) is kept and reused."""
  rng = np.random.default_rng(9)
  def fn(x, idx): return x[idx] * Tensor([1.0, -1.0, 2.0]), x.argmax(axis=1), Tensor([7, 8])
  jitted = TinyJit(fn)
  for _ in range(6):
    a, i = _rand(rng, 4, 3), rng.integers(0, 4, 3).astype(np.int32)
    got = [t.numpy() for t in jitted(Tensor(a), Tensor(i))]
    assert got[0].tobytes() == (a[i] * np.array([1.0, -1.0, 2.0], np.float32)).tobytes()
    assert got[1].tolist() == a.argmax(axis=1).tolist() and got[2].tolist() == [7, 8]
  assert jitted.cnt == 6


def test_state_read_but_not_written():
  """State created before the first call (a closure's weight) is read by the replayed kernels as it is now."""
  w = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
  jitted = TinyJit(lambda x: x @ w)
  for i in range(4):
    x = np.array([[i, 1.0]], np.float32)
    assert jitted(Tensor(x)).numpy().tolist() == (x @ w.numpy()).tolist()


def test_reset_and_method_decorator():
  """JIT.CALLS: reset() drops the capture, so new shapes are accepted; a decorated method binds its instance."""
  class Model:
    def __init__(self, k): self.k = k
    @TinyJit
    def __call__(self, x): return x * self.k
  m = Model(2.0)
  for _ in range(3): assert m(Tensor([1.0, 3.0])).tolist() == [2.0, 6.0]
  with pytest.raises(SpecError, match="args\\[1\\] changed shape"):
    m(Tensor([1.0, 3.0, 4.0]))
  with pytest.raises(SpecError, match="non-tensor argument args\\[0\\]"):
    Model(5.0)(Tensor([1.0, 3.0]))
  Model.__call__.reset()
  for _ in range(3): assert m(Tensor([1.0, 3.0, 4.0])).tolist() == [2.0, 6.0, 8.0]


def test_jit_inside_jit():
  """A jitted function called inside another's capture is recorded by the outer one too (JIT.CAPTURE)."""
  inner = TinyJit(lambda x: x * 3)
  outer = TinyJit(lambda x: inner(x + 1) - 1)
  for i in range(6): assert outer(Tensor([float(i)])).tolist() == [(i + 1) * 3 - 1]


W_TRUE, B_TRUE = np.array([[1.0, -2.0], [0.5, 0.0], [-1.0, 3.0]], np.float32), np.array([0.25, -0.5], np.float32)


def _data(rng) -> list[tuple[np.ndarray, np.ndarray]]:
  """Batches of a learnable linear problem: y = x @ W_TRUE + B_TRUE."""
  return [(x, x @ W_TRUE + B_TRUE) for x in (_rand(rng, 8, 3) for _ in range(CALLS))]


def _loss_falls(losses: list[bytes]) -> bool:
  return np.frombuffer(losses[-1], np.float32)[0] < 0.5 * np.frombuffer(losses[0], np.float32)[0]


def test_functional_training_step():
  """A training step that takes and returns its weights (no assign): 10 jitted steps equal 10 plain steps."""
  rng = np.random.default_rng(5)
  data, w0 = _data(rng), _rand(rng, 3, 2)

  def step(x, y, w):
    loss = ((x @ w - y) ** 2).mean()
    return loss, w - loss.gradient(w)[0] * 0.2
  runs = {}
  for name, fn in (("plain", step), ("jit", TinyJit(step))):
    w, losses = Tensor(w0.copy()), []
    for x, y in data:
      loss, w = fn(Tensor(x), Tensor(y), w)
      losses.append(_bits(loss))
    runs[name] = losses + [_bits(w)]
  assert runs["jit"] == runs["plain"] and _loss_falls(runs["jit"][:-1])


def test_training_step_with_assign():
  """JIT.STATE: a linear model trained by SGD with assign: 10 jitted steps give exactly the plain loop's losses and
  parameters, and those follow numpy's SGD."""
  rng = np.random.default_rng(6)
  data, w0, b0 = _data(rng), _rand(rng, 3, 2), _rand(rng, 2)
  lr = 0.1
  runs = []
  for use_jit in (False, True):
    w, b = Tensor(w0.copy()).realize(), Tensor(b0.copy()).realize()

    def step(x, y):
      loss = ((x @ w + b - y) ** 2).mean()
      gw, gb = loss.gradient(w, b)
      w.assign(w - gw * lr)
      b.assign(b - gb * lr)
      Tensor.realize(loss, w, b)
      return loss
    fn = TinyJit(step) if use_jit else step
    runs.append([_bits(fn(Tensor(x), Tensor(y))) for x, y in data] + [_bits(w), _bits(b)])
  assert runs[0] == runs[1] and _loss_falls(runs[1][:CALLS])
  nw, nb = w0.astype(np.float64), b0.astype(np.float64)
  for x, y in data:   # the same steps in numpy: d/dw mean(e^2) = 2 x^T e / e.size
    e = x @ nw + nb - y
    nw, nb = nw - lr * 2 * x.T @ e / e.size, nb - lr * 2 * e.sum(0) / e.size
  np.testing.assert_allclose(np.frombuffer(runs[1][-2], np.float32).reshape(3, 2), nw, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.frombuffer(runs[1][-1], np.float32), nb, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make_opt", ["SGD", "Adam"])
def test_optimizer_training_step(make_opt):
  """JIT.STATE: nn.Linear trained with zero_grad/backward/step of nn.optim (momentum and Adam's moments and step
  count are state updated in place) and a cross-entropy loss (its class arange is host data equal on every call):
  10 jitted steps give exactly the plain loop's losses and weights."""
  nn = pytest.importorskip("refimpl.nn", reason="JIT.STATE: the optimizer test needs refimpl.nn (issue 4)")
  from refimpl.nn import optim
  rng = np.random.default_rng(10)
  data = [(_rand(rng, 8, 4), rng.integers(0, 3, 8).astype(np.int32)) for _ in range(CALLS)]
  runs = []
  for use_jit in (False, True):
    Tensor.manual_seed(0)
    layer = nn.Linear(4, 3)
    opt = optim.SGD([layer.weight, layer.bias], lr=0.1, momentum=0.9) if make_opt == "SGD" else \
      optim.Adam([layer.weight, layer.bias], lr=0.05)

    def step(x, y):
      with Tensor.train():
        opt.zero_grad()
        loss = layer(x).sparse_categorical_crossentropy(y)
        loss.backward()
        opt.step()
        return loss
    fn = TinyJit(step) if use_jit else step
    runs.append([_bits(fn(Tensor(x), Tensor(y))) for x, y in data] + [_bits(layer.weight), _bits(layer.bias)])
  assert runs[0] == runs[1]
  assert len(set(runs[1][CALLS:])) == 2 and runs[1][0] != runs[1][CALLS - 1]


def test_assign_to_an_argument():
  """JIT.STATE / JIT.OUTPUTS: an in-place update of a tensor argument writes the new call's argument."""
  def double(x):
    x.assign(x * 2 + 1)
    return x
  jitted = TinyJit(double)
  for i in range(5):
    x = Tensor([float(i), -1.0])
    out = jitted(x)
    assert x.tolist() == [2.0 * i + 1, -1.0] and out.tolist() == x.tolist()


def test_assign_into_host_data_is_refused():
  """JIT.CAPTURE: an assign into a Tensor built from host data inside the function cannot be replayed (the replay
  would start from the overwritten values): refused at the capture, while the first call runs normally."""
  def fn(x):
    acc = Tensor([1.0, 2.0])
    acc.assign(acc + x)
    return acc * 1
  jitted = TinyJit(fn)
  assert jitted(Tensor([1.0, 1.0])).tolist() == [2.0, 3.0]
  with pytest.raises(SpecError, match="overwrites data copied in from the host") as e:
    jitted(Tensor([1.0, 1.0]))
  assert e.value.clause == "JIT.CAPTURE"


def test_int_dtype_kernels():
  """Replays are exact on integer kernels too (a dtype other than float32 for the captured programs)."""
  rng = np.random.default_rng(7)
  jitted = TinyJit(lambda x: (x * 3 + 1) % 7)
  for _ in range(5):
    a = rng.integers(-50, 50, 5).astype(np.int32)
    assert jitted(Tensor(a)).numpy().tolist() == ((a * 3 + 1) % 7).tolist()
    assert jitted.captured is None or jitted.captured[0].out.dtype == dtypes.int32


def _has_cpu() -> bool:
  try: return "CPU" in Device.names()
  except Exception: return False


@pytest.mark.skipif(not _has_cpu(), reason="JIT.INPUTS: a device change needs a second device (CPU) registered")
def test_other_device_and_device_change():
  """JIT.REPLAY on CPU matches the plain function bit for bit; JIT.INPUTS: moving an argument to another device after
  the capture is refused, naming both devices."""
  rng = np.random.default_rng(11)
  jitted = TinyJit(f_reduce)
  for _ in range(4):
    a, b = _rand(rng, 3, 4), _rand(rng, 3, 4)
    got = jitted(Tensor(a, device="CPU"), Tensor(b, device="CPU")).numpy()
    assert got.tobytes() == f_reduce(Tensor(a, device="CPU"), Tensor(b, device="CPU")).numpy().tobytes()
  with pytest.raises(SpecError, match="args\\[0\\] changed device: captured with 'CPU', called with 'PYTHON'"):
    jitted(Tensor(a, device="PYTHON"), Tensor(b, device="CPU"))


def test_import_paths():
  """`from refimpl import TinyJit` and older tinygrad's module path `refimpl.jit` name the same class."""
  from refimpl.jit import TinyJit as old_path
  assert old_path is TinyJit and TinyJit.__module__ == "refimpl.jit"


def test_decorator_forms():
  """JIT.DECORATOR: @TinyJit and @TinyJit(prune=True) wrap the function alike and give the same values."""
  @TinyJit
  def plain(x): return (x * 2 + 1).realize()
  @TinyJit(prune=True)
  def pruned(x): return (x * 2 + 1).realize()
  assert isinstance(plain, TinyJit) and isinstance(pruned, TinyJit) and pruned.prune
  for i in range(4):
    x = Tensor([float(i), -1.0])
    np.testing.assert_array_equal(plain(x).numpy(), [2 * i + 1, -1.0])
    np.testing.assert_array_equal(pruned(x).numpy(), [2 * i + 1, -1.0])
  assert pruned.cnt == 4
