"""The lazy Tensor core end to end on the default device: values against numpy, kernel counts (fusion), the seed's
sharing of realized results, and the kernel AST of `t + 3 + 4`."""
import numpy as np
import pytest

from refimpl.codegen import full_rewrite_to_sink
from refimpl.dtype import dtypes
from refimpl.tensor import Tensor
from refimpl.uop import Ops

A = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
B = np.array([1.0, -1.0, 2.0], np.float32)


def test_creation_dtype_shape_and_values():
  t = Tensor([1, 2, 3, 4])
  assert t.dtype == dtypes.int and t.shape == (4,) and t.tolist() == [1, 2, 3, 4]
  assert Tensor(A).dtype == dtypes.float32 and Tensor(A).tolist() == A.tolist()
  assert Tensor.full((2, 3), 7).tolist() == [[7] * 3] * 2
  assert Tensor.arange(0, 10, 2).tolist() == [0, 2, 4, 6, 8]


def test_elementwise_broadcast_and_promotion():
  a, b = Tensor(A), Tensor(B)
  np.testing.assert_array_equal((a + b).numpy(), A + B)
  np.testing.assert_array_equal((a * 2 - 1).numpy(), A * 2 - 1)
  np.testing.assert_array_equal((2 - a).numpy(), 2 - A)
  assert (Tensor([1, 2]) + 1.5).dtype == dtypes.float32      # DT.SCALAR-PROMOTE: int tensor, float scalar
  assert (Tensor([1, 2], dtype=dtypes.int8) + 1).dtype == dtypes.int8
  assert (Tensor([1, 2]) / 2).tolist() == [0.5, 1.0]


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_reductions_match_numpy(axis):
  a, b = Tensor(A), Tensor(B)
  np.testing.assert_array_equal((a + b).relu().sum(axis=axis).numpy(), np.maximum(A + B, 0).sum(axis=axis))
  np.testing.assert_array_equal(a.max(axis=axis).numpy(), A.max(axis=axis))


def test_movement_ops_are_index_arithmetic():
  a = Tensor(A)
  np.testing.assert_array_equal(a.T.numpy(), A.T)
  np.testing.assert_array_equal(a.flip(1).numpy(), A[:, ::-1])
  np.testing.assert_array_equal(a.pad(((1, 0), (0, 1))).numpy(), np.pad(A, ((1, 0), (0, 1))))
  np.testing.assert_array_equal(a.shrink(((0, 1), (1, 3))).numpy(), A[0:1, 1:3])
  np.testing.assert_array_equal(a.reshape(3, 2).numpy(), A.reshape(3, 2))
  np.testing.assert_array_equal(a.reshape(-1).expand(2, 6).numpy(), np.broadcast_to(A.reshape(-1), (2, 6)))


def test_matmul_and_softmax_style_reduce_then_broadcast():
  a = Tensor(A)
  np.testing.assert_array_equal((a @ a.T).numpy(), A @ A.T)
  x = np.array([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]], np.float32)
  t = Tensor(x)
  np.testing.assert_array_equal((t - t.max(axis=1, keepdim=True)).numpy(), x - x.max(axis=1, keepdims=True))


def test_fusion_kernel_counts():
  a, b = Tensor(A), Tensor(B)
  assert len((a + b).relu().sum().schedule()) == 1            # the example: one kernel
  assert len(((a + 1) * 2).relu().schedule()) == 1
  t = Tensor(A)
  assert len((t - t.max(axis=1, keepdim=True)).schedule()) == 2   # a reduce behind an EXPAND is materialized


def test_identical_graphs_share_the_realized_buffer():
  t = Tensor([1, 2, 3, 4])
  A_, B_ = t * 4, t * 4
  assert A_ is not B_ and A_.uop is B_.uop
  A_.realize()
  assert A_.uop is B_.uop and A_.uop.op is Ops.BUFFER
  assert B_.tolist() == [4, 8, 12, 16]


def test_kernelize_constant_folds_the_seed_example():
  t = Tensor([1, 2, 3, 4]) + 3 + 4
  t.kernelize()
  assert t.uop.op is Ops.ASSIGN and t.uop.src[1].op is Ops.KERNEL
  sink = full_rewrite_to_sink(t.uop.src[1].arg.ast)
  store = sink.src[0]
  assert store.op is Ops.STORE and store.src[1].op is Ops.ADD and store.src[1].src[1].arg == 7
  assert store.src[1].src[0].op is Ops.LOAD and store.src[0].src[1].op is Ops.SPECIAL
  assert t.tolist() == [8, 9, 10, 11]


def test_zero_size_and_one_size_dims():
  z = Tensor(np.zeros((0, 3), np.float32))
  assert (z + 1).numpy().shape == (0, 3)
  assert z.sum(axis=0).tolist() == [0.0, 0.0, 0.0]
  one = Tensor(np.ones((1, 3), np.float32))
  np.testing.assert_array_equal((one * Tensor(A)).numpy(), A)


def test_realizing_a_kernelized_tensor_runs_its_kernel_and_no_copy():
  t = (Tensor([1, 2, 3, 4]) * 2).kernelize()
  assert len(t.schedule()) == 1     # the kernel kernelize made, not a second one copying its output
  t.realize()
  assert t.uop.op is Ops.BUFFER and t.tolist() == [2, 4, 6, 8]
