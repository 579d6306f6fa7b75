"""Clauses of the chapters in the coverage table (conformance/report.py) that no conformance test can check, each
with the reason. coverage.md marks them `descriptive` instead of listing them as untested, and
tests/test_conformance_coverage.py fails if a clause of spec/ops.md or spec/gradients.md has neither a conformance
test citing it nor an entry here. Keep the list short: a clause whose behaviour an implementation can show through
the adapter interface gets a test, not an entry."""
from __future__ import annotations

__all__ = ["DESCRIPTIVE"]

_CHECKER = "a rule of how the suite measures errors (conformance/accuracy.py), applied by every forward and gradient " \
           "test; it binds the checker, not the implementation"

DESCRIPTIVE: dict[str, str] = {
  "OP.VALUES.check": "a precondition of the executable spec (exec_alu rejects an operand outside its dtype): the "
                     "adapter interface hands an implementation only values of their dtype, so no conformance test "
                     "can present one; tests/test_semantics_floats.py and test_semantics_tables.py check exec_alu",
  "ACC.MEASURE": "the heading of the measurement rules below",
  "ACC.MEASURE.reference": _CHECKER + " (the torch float64 reference, rounded once: round_to)",
  "ACC.MEASURE.ulp": _CHECKER + " (ulp, ulp_distance)",
  "ACC.MEASURE.special": _CHECKER + " (check: NaN and infinities)",
  "ACC.MEASURE.exact": _CHECKER + " (check: exact and equal bounds)",
  "ACC.MEASURE.bound": _CHECKER + " (Bound.evaluate)",
  "ACC.MEASURE.scale": _CHECKER + " (S, computed with torch autograd by conformance/properties.py)",
  "ACC.RANGE": "the input domains the suite draws from (Domain.limit and Op.grad_domain in conformance/catalogue): a "
               "rule of the sampling, applied by every property test",
  "TENSOR.POW.int-negative": "a refusal of an argument (API.ERRORS): the adapter interface compares values, not "
                             "errors; tests/test_bad_input.py checks the class and clause on PYTHON and CPU",
  "TENSOR.GETITEM.range": "out-of-range tensor indices: torch, the catalogue's reference for getitem, raises there, "
                          "so the catalogue draws indices in range; tests/test_bad_input.py checks the default (0) "
                          "and the checked mode (CHECK_INDEX=1, API.INDEX.checked) on PYTHON and CPU",
  "TENSOR.MODEL": "what a Tensor-level clause says: a rule of how spec/tensor*.md is written",
  "TENSOR.ORACLE": "how the suite checks a Tensor-level op: a rule of the catalogue (conformance/catalogue), applied "
                   "by every Tensor op's entry",
  "TENSOR.COMPOSED": "how a composition's bound follows from its parts: a rule of spec/accuracy.md's tables, each of "
                     "which is cited by the tests it bounds",
  "TENSOR.ALU": "Tensor.alu takes a member of the implementation's own Ops enum, which the adapter interface does not "
                "carry, so no conformance test can call it portably; tests/test_tensor_math.py checks refimpl's",
  "ACC.TABLE": "the heading of the bound tables; each row is a clause of its own, cited by the tests it bounds",
  "TENSOR.QR.signs": "refimpl's sign convention for Q and R: the catalogue checks qr by what defines it (Q R = x, Q "
                     "orthogonal), which every convention meets (tinygrad keeps Householder signs); "
                     "tests/test_tensor_misc.py checks refimpl's convention against torch.linalg.qr",
  "TENSOR.SVD.signs": "refimpl's sign convention for the singular vectors, as TENSOR.QR.signs: the catalogue checks "
                      "svd by U S Vh = x, the singular values and orthogonality; tests/test_tensor_misc.py checks the "
                      "convention against torch.linalg.svd",
}
