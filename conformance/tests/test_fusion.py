"""Kernel counts of the fusion clauses (CONF.FUSION): expressions over realized inputs and the number of kernels
realizing them schedules."""
from __future__ import annotations

import numpy as np
import pytest

# (clause, expression over a, b: (4, 5) float32 and c: (5,) float32, kernels)
PROGRAMS = [
  ("CONF.FUSION.elementwise", "((a * b) + c).exp()", 1),
  ("CONF.FUSION.elementwise", "(a.half() + 1).float() * b", 1),
  ("CONF.FUSION.movement", "a.permute(1, 0).pad(((1, 1), (0, 2))).flip(0)", 1),
  ("CONF.FUSION.movement", "a.reshape(5, 4).shrink(((1, 4), (0, 2))).expand(2, 3, 2) + 1", 1),
  ("CONF.FUSION.reduce", "(a + b).relu().sum()", 1),
  ("CONF.FUSION.reduce", "(a @ b.T).relu()", 1),
  ("CONF.FUSION.reduce", "a.mean()", 1),
  ("CONF.FUSION.reduce-consumer", "(a.sum(1) * 2).sqrt()", 1),
  ("CONF.FUSION.reduce-consumer", "a.sum() + b.sum()", 1),
  ("CONF.FUSION.reduce-reduce", "a.sum(1).sum()", 2),
  ("CONF.FUSION.reduce-reduce", "(a.max(1) * 2).sum()", 2),
  ("CONF.FUSION.reduce-reduce", "(a @ b.T).sum()", 2),
  ("CONF.FUSION.reduce-reduce", "a.sum(0).sum(keepdim=True)", 2),
  ("CONF.FUSION.expand", "a - a.max(1, keepdim=True)", 2),
  ("CONF.FUSION.expand", "a.softmax(1)", 3),
]


@pytest.mark.parametrize("clause,expr,kernels", [
  pytest.param(*p, id=p[1], marks=[pytest.mark.clauses(p[0]), pytest.mark.conformance(op=p[1], dtype="float32",
                                                                                      prop="fusion")])
  for p in PROGRAMS])
def test_kernel_count(adapter, clause, expr, kernels):
  rng = np.random.default_rng(0)
  inputs = {n: adapter.tensor(rng.standard_normal(s).astype(np.float32), "float32")
            for n, s in (("a", (4, 5)), ("b", (4, 5)), ("c", (5,)))}
  for t in inputs.values(): adapter.numpy(t)   # realized buffers, so that only the expression's kernels count
  got = adapter.count_kernels(adapter.evaluate(expr, inputs, {}))
  if got is None: pytest.skip(f"{adapter.name} cannot count kernels ({clause} unchecked)")
  assert got == kernels, f"{clause}: {expr} schedules {got} kernels, the spec says {kernels}"
