"""The clauses of spec/tensor_misc.md (and DT.RANGE, GRAD.NOGRAD.default) that the catalogue's property tests do not
reach: tensor facts, the refusals, creation and matmul parameters, and the random samplers, whose values differ from
torch's by design, so ranges, shapes, dtypes, determinism under manual_seed and distributions are checked instead.

Everything runs through `Adapter.evaluate` (expressions over the implementation's Tensor and dtypes)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from conformance.catalogue.misc import threefry_reference


def _run(adapter, expr: str, **inputs):
  return adapter.evaluate(expr, inputs, {})


def _np(adapter, expr: str, **inputs) -> np.ndarray:
  return adapter.numpy(_run(adapter, expr, **inputs))


def _x(adapter, values, dtype="float32"):
  return adapter.tensor(np.asarray(values), dtype)


# ---------------------------------------------------------------------------------------------------- facts

FACTS = [
  ("TENSOR.SIZE", "x.size()", (2, 3)), ("TENSOR.SIZE", "x.size(1)", 3), ("TENSOR.SIZE", "x.size(-2)", 2),
  ("TENSOR.NBYTES", "x.nbytes()", 24), ("TENSOR.NBYTES", "x.element_size()", 4),
  ("TENSOR.NBYTES", "x.cast(dtypes.int16).nbytes()", 12), ("TENSOR.NBYTES", "x.cast(dtypes.bool).element_size()", 1),
  ("TENSOR.NBYTES", "x.shrink(((0, 0), None)).nbytes()", 0),
  ("TENSOR.IS_FLOATING_POINT", "x.is_floating_point()", True),
  ("TENSOR.IS_FLOATING_POINT", "x.cast(dtypes.bfloat16).is_floating_point()", True),
  ("TENSOR.IS_FLOATING_POINT", "x.cast(dtypes.int64).is_floating_point()", False),
  ("TENSOR.IS_FLOATING_POINT", "x.cast(dtypes.bool).is_floating_point()", False),
  ("TENSOR.MAX_SHAPE", "x.max_shape", (2, 3)), ("TENSOR.MAX_SHAPE", "x.max_numel()", 6),
  ("TENSOR.SHORTHANDS", "x.short().dtype == dtypes.int16", True),
  ("TENSOR.SHORTHANDS", "x.bfloat16().dtype == dtypes.bfloat16", True),
  ("TENSOR.DATA", "x.data().tolist()", [[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]]),
  ("TENSOR.DATA", "x.data().format", "f"), ("TENSOR.DATA", "x.cast(dtypes.int8).data().shape", (2, 3)),
  ("TENSOR.SLOTS", "hasattr(Tensor, 'grad') and hasattr(Tensor, 'uop')", True),
  ("TENSOR.SLOTS", "x.grad is None", True),
  ("TENSOR.REALIZE", "x.realize(do_update_stats=False).numpy().tolist()", [[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]]),
  ("TENSOR.REPLACE", "x.replace(x * 2).numpy().tolist()", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
  ("TENSOR.CLONE", "x.clone().numpy().tolist()", [[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]]),
  ("DT.RANGE", "(dtypes.int32.min, dtypes.int32.max, dtypes.uint8.max, dtypes.int64.min, dtypes.uint64.max)",
   (-2 ** 31, 2 ** 31 - 1, 255, -2 ** 63, 2 ** 64 - 1)),
  ("DT.RANGE", "(dtypes.bool.min, dtypes.bool.max, dtypes.float32.min, dtypes.float16.max)",
   (False, True, -float("inf"), float("inf"))),
]


@pytest.mark.parametrize("clause,expr,want", [pytest.param(c, e, w, id=f"{c}:{e}", marks=pytest.mark.clauses(c))
                                              for c, e, w in FACTS])
def test_facts(adapter, clause, expr, want):
  x = _x(adapter, np.arange(1, 7, dtype=np.float32).reshape(2, 3) / 2)
  got = _run(adapter, expr, x=x)
  assert (tuple(got) if isinstance(got, (tuple, list)) and isinstance(want, tuple) else got) == want


@pytest.mark.clauses("TENSOR.SIZE.dim", "TENSOR.REPLACE.shape", "TENSOR.DATA.format", "TENSOR.QR.shape",
                     "TENSOR.QR.dtype", "TENSOR.SVD.shape", "TENSOR.SVD.dtype", "TENSOR.MULTINOMIAL.shape",
                     "TENSOR.MULTINOMIAL.num_samples", "TENSOR.THREEFRY.dtype", "TENSOR.RAND.dtype")
@pytest.mark.parametrize("expr", ["x.size(2)", "x.replace(x.reshape(3, 2))", "x.bfloat16().data()",
                                  "x.reshape(6).qr()", "x.cast(dtypes.int32).qr()", "x.reshape(6).svd()",
                                  "x.cast(dtypes.int32).svd()", "x.reshape(1, 1, 6).multinomial()",
                                  "x.multinomial(0)", "x.reshape(6).multinomial(7)", "x.threefry(x)",
                                  "Tensor.rand(2, dtype=dtypes.int32)"])
def test_refusals(adapter, expr):
  x = _x(adapter, np.ones((2, 3), np.float32))
  with pytest.raises(Exception):
    _run(adapter, expr, x=x)


@pytest.mark.clauses("TENSOR.FROM_BLOB", "TENSOR.FROM_BLOB.ptr")
def test_from_blob_copies(adapter):
  arr = np.arange(6, dtype=np.int32)
  t = _run(adapter, "Tensor.from_blob(ptr, (2, 3), dtype=dtypes.int32)", ptr=arr.ctypes.data)
  assert adapter.numpy(t).tolist() == [[0, 1, 2], [3, 4, 5]]
  ctypes.memset(arr.ctypes.data, 0, arr.nbytes)   # refimpl copies, tinygrad aliases: only read after this
  with pytest.raises(Exception):
    _run(adapter, "Tensor.from_blob(0, (2,), dtype=dtypes.int32)")


@pytest.mark.clauses("TENSOR.CONTIGUOUS_BACKWARD", "GRAD.CONTIGUOUS_BACKWARD", "GRAD.CONTIGUOUS")
def test_contiguous_backward_gradient(adapter):
  x = _x(adapter, [1.0, -2.0, 3.0])
  y = _run(adapter, "(x.contiguous_backward() * x).sum()", x=x)
  (g,) = adapter.gradient(y, [x], adapter.tensor(np.array(1.0, np.float32), "float32"))
  assert adapter.numpy(g).tolist() == [2.0, -4.0, 6.0]


@pytest.mark.clauses("GRAD.NOGRAD", "GRAD.NOGRAD.default")
def test_gradient_of_an_undecided_tensor(adapter):
  """gradient() works for a tensor made with the default requires_grad (None)."""
  x = _run(adapter, "Tensor([1.0, 2.0, 3.0])")
  y = _run(adapter, "(x * x).sum()", x=x)
  (g,) = adapter.gradient(y, [x], adapter.tensor(np.array(1.0, np.float32), "float32"))
  assert adapter.numpy(g).tolist() == [2.0, 4.0, 6.0]


# ---------------------------------------------------------------------------------------------------- creation, matmul

@pytest.mark.clauses("TENSOR.FULL", "TENSOR.FULL.buffer")
@pytest.mark.parametrize("expr,want,dtype", [
  ("Tensor.full((2, 2), 7, buffer=False)", [[7, 7], [7, 7]], "int32"),
  ("Tensor.full(3, 1.5, dtype=dtypes.float16)", [1.5, 1.5, 1.5], "float16"),
  ("x.full_like(3, dtype=dtypes.int8)", [3, 3], "int8"), ("x.full_like(True)", [1.0, 1.0], "float32"),
  ("x.empty_like(dtype=dtypes.int16).full_like(0)", [0, 0], "int16"), ("x.zeros_like(dtype=dtypes.bool)",
                                                                       [False, False], "bool")])
def test_full_parameters(adapter, expr, want, dtype):
  t = _run(adapter, expr, x=_x(adapter, [1.0, 2.0]))
  assert adapter.dtype_name(t) == dtype and adapter.numpy(t).tolist() == want


@pytest.mark.clauses("TENSOR.ARANGE", "TENSOR.ARANGE.wide")
def test_arange_beyond_int32(adapter):
  t = _run(adapter, "Tensor.arange(2**31, 2**31 + 3)")
  assert adapter.dtype_name(t) == "int64" and adapter.numpy(t).tolist() == [2 ** 31, 2 ** 31 + 1, 2 ** 31 + 2]
  t = _run(adapter, "Tensor.arange(-2**31 - 2, -2**31)")
  assert adapter.dtype_name(t) == "int64" and adapter.numpy(t).tolist() == [-2 ** 31 - 2, -2 ** 31 - 1]
  assert adapter.dtype_name(_run(adapter, "Tensor.arange(5)")) == "int32"


@pytest.mark.clauses("TENSOR.MATMUL", "TENSOR.MATMUL.dtype")
def test_matmul_accumulation_dtype(adapter):
  a, b = _x(adapter, [1, 2], "int8"), _x(adapter, [100, 100], "int8")
  t = _run(adapter, "a.dot(b)", a=a, b=b)
  assert adapter.dtype_name(t) == "int8" and adapter.numpy(t).tolist() == 44   # 300 wraps; products wrap too
  t = _run(adapter, "a.matmul(b, dtype=dtypes.int32)", a=a, b=b)
  assert adapter.dtype_name(t) == "int32" and adapter.numpy(t).tolist() == 44   # 200 wrapped to -56 before the sum
  t = _run(adapter, "a.float().half().dot(b.half(), dtype=dtypes.float32)", a=a, b=b)
  assert adapter.dtype_name(t) == "float32" and adapter.numpy(t).tolist() == 300.0


# ---------------------------------------------------------------------------------------------------- random

@pytest.mark.clauses("TENSOR.RAND", "TENSOR.RAND.contiguous", "TENSOR.RAND_LIKE", "TENSOR.SCALED_UNIFORM")
@pytest.mark.parametrize("expr,lo,hi,dtype,shape", [
  ("Tensor.rand(50, 4, contiguous=False)", 0.0, 1.0, "float32", (50, 4)),
  ("x.rand_like()", 0.0, 1.0, "float16", (300,)), ("x.rand_like(dtype=dtypes.float64)", 0.0, 1.0, "float64", (300,)),
  ("x.randn_like()", -10.0, 10.0, "float16", (300,)),
  ("Tensor.scaled_uniform(20, 5)", -0.1, 0.1, "float32", (20, 5))])
def test_sampler_ranges_and_determinism(adapter, expr, lo, hi, dtype, shape):
  x = _x(adapter, np.zeros(300, np.float16), "float16")
  _run(adapter, "Tensor.manual_seed(7)")
  a = _np(adapter, expr, x=x)
  _run(adapter, "Tensor.manual_seed(7)")
  b = _np(adapter, expr, x=x)
  t = _run(adapter, expr, x=x)
  assert a.shape == shape and adapter.dtype_name(t) == dtype
  assert (a >= lo).all() and (a < hi).all() and np.array_equal(a, b)
  assert len(np.unique(a)) > a.size // 4   # not a constant


@pytest.mark.clauses("TENSOR.RANDPERM")
def test_randperm_is_a_permutation(adapter):
  p = _run(adapter, "Tensor.randperm(50)")
  assert adapter.dtype_name(p) == "int32" and sorted(adapter.numpy(p).tolist()) == list(range(50))
  assert adapter.numpy(p).tolist() != list(range(50))
  assert adapter.dtype_name(_run(adapter, "Tensor.randperm(3, dtype=dtypes.int64)")) == "int64"


@pytest.mark.clauses("TENSOR.MULTINOMIAL")
def test_multinomial_distribution(adapter):
  w = _x(adapter, [1.0, 0.0, 3.0, 4.0])
  s = _run(adapter, "w.multinomial(4000, replacement=True)", w=w)
  v = adapter.numpy(s)
  assert adapter.dtype_name(s) == "int32" and v.shape == (4000,) and not (v == 1).any()
  freq = np.bincount(v, minlength=4) / 4000
  assert np.abs(freq - np.array([1, 0, 3, 4]) / 8).max() < 0.04   # about 5 standard deviations
  rows = adapter.numpy(_run(adapter, "w.reshape(1, 4).expand(30, 4).multinomial(3)", w=w))
  assert rows.shape == (30, 3) and all(len(set(r)) == 3 and 1 not in r for r in rows.tolist())


@pytest.mark.clauses("TENSOR.THREEFRY")
def test_threefry_known_answers(adapter):
  """The known-answer vectors of Random123 for Threefry-2x32-20 (counter, key) -> result, words (low, high)."""
  ctr = np.array([0, 0xFFFFFFFFFFFFFFFF, 0x85A308D3243F6A88], np.uint64)
  key = np.array([0, 0xFFFFFFFFFFFFFFFF, 0x0370734413198A2E], np.uint64)
  got = _np(adapter, "x.threefry(k)", x=adapter.tensor(ctr, "uint64"), k=adapter.tensor(key, "uint64"))
  want = np.array([0x99BA4EFE6B200159, 0xBB002BE71CB996FC, 0x483DF7A0C4923A9C], np.uint64)
  assert got.tolist() == want.tolist() == threefry_reference(ctr, key).tolist()


def _random_bits_reference(key: np.ndarray, counter: np.ndarray, num: int) -> np.ndarray:
  """TENSOR.RANDOM_BITS for num < 2**32 - 1 (one chunk), from threefry_reference."""
  def bits(k, c0, c1):
    y = threefry_reference((c1.astype(np.uint64) << np.uint64(32)) | c0.astype(np.uint64),
                           (np.uint64(k[1]) << np.uint64(32)) | np.uint64(k[0]))
    return np.concatenate([(y & np.uint64(0xFFFFFFFF)).astype(np.uint32), (y >> np.uint64(32)).astype(np.uint32)])
  chunk_key = bits(key, counter[:1], counter[1:])
  h = (num + 1) // 2
  c0 = np.arange(h, dtype=np.uint32)
  return bits(chunk_key, c0, c0 + np.uint32(h))[:num]


@pytest.mark.clauses("TENSOR.RANDOM_BITS")
@pytest.mark.parametrize("num", [0, 1, 5, 8])
def test_random_bits(adapter, num):
  key, counter = np.array([1, 2], np.uint32), np.array([3, 0xFFFFFFFF], np.uint32)
  got = _np(adapter, "Tensor.random_bits(k, c, num)", k=adapter.tensor(key, "uint32"),
            c=adapter.tensor(counter, "uint32"), num=num)
  assert got.tolist() == _random_bits_reference(key, counter, num).tolist()
