"""The functional layer ops of spec/nn.md: conv_transpose2d, dropout, layernorm, batchnorm, one_hot, sequential,
assign and the losses. Class labels are int32 inputs drawn inside [0, classes), where torch defines them."""
from __future__ import annotations


from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue.core import FLOATS, Domain, Op, finite_inputs, fixed, reduced_count, sqrt_max

__all__ = ["OPS"]


@st.composite
def _conv_transpose(draw):
  groups = draw(st.integers(1, 2))
  cin, cpg = groups * draw(st.integers(1, 2)), draw(st.integers(1, 2))
  k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
  stride, dilation = draw(st.integers(1, 2)), draw(st.integers(1, 2))
  padding = draw(st.integers(0, 1))
  output_padding = draw(st.integers(0, max(stride, dilation) - 1))
  hw = tuple(draw(st.integers(1, 4)) for _ in k)
  # the output must not be empty: (n-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1 >= 1
  if any((n - 1) * stride - 2 * padding + dilation * (kk - 1) + output_padding < 0 for n, kk in zip(hw, k)):
    padding = 0
  return {"shapes": ((draw(st.integers(1, 2)), cin, *hw), (cin, cpg, *k), (cpg * groups,)),
          "params": {"groups": groups, "stride": stride, "dilation": dilation, "padding": padding,
                     "output_padding": output_padding}}


@st.composite
def _trailing_norm(draw):
  shape = draw(S.shapes(1, 3, 1, 4))
  return {"shapes": (shape,), "params": {"axis": draw(st.sampled_from([-1, tuple(range(-min(2, len(shape)), 0))]))}}


@st.composite
def _batchnorm(draw):
  shape = draw(S.shapes(2, 4, 1, 3))
  c = (shape[1],)
  return {"shapes": (shape, c, c, c, c), "params": {}}


@st.composite
def _attention(draw):
  """Query (..., n, d), key (..., m, d), value (..., m, dv) with broadcast batch axes."""
  batch = draw(S.shapes(0, 2, 1, 2))
  n, m, d, dv = (draw(st.integers(1, 3)) for _ in range(4))
  return {"shapes": ((*batch, n, d), (*batch, m, d), (*batch, m, dv)), "params": {"causal": draw(st.booleans())}}


@st.composite
def _scores_and_labels(draw, class_axis_last: bool, lowest_label: int = 0):
  """Scores (N, C, *rest) or (..., C) and int32 labels of the scores' shape without the class axis, inside
  [lowest_label, C) (torch raises on other labels)."""
  shape = draw(S.shapes(1, 3, 1, 4))
  axis = len(shape) - 1 if class_axis_last else (1 if len(shape) > 1 else 0)
  labels = shape[:axis] + shape[axis + 1:]
  return {"shapes": (shape, labels), "params": {}, "ranges": {"y": (lowest_label, shape[axis] - 1)}}


def _loss(name, call, torch, shapes, label=True, ranges=None, params=None, clauses=(), **kw) -> Op:
  """A loss of scores (or probabilities) x against targets y: int32 labels when `label`, else floats like x."""
  dom = Domain("reduce", FLOATS, ("x", "y"), ranges=ranges or {}, shapes=shapes, params=params, specials=False,
               input_dtype=(lambda d, i: "int32" if i == 1 else d) if label else None, smooth=dict(ranges or {}))
  return Op(name, call, torch, dom, ("NN.LOSS", *clauses), "LOSS", "GRAD", n=lambda case: case.inputs[0].size,
            diff_inputs=("x",), **kw)


_REDUCTION = st.sampled_from(["mean", "sum", "none"])

OPS: list[Op] = [
  Op("conv_transpose2d", "x.conv_transpose2d(w, b, groups=groups, stride=stride, dilation=dilation, padding=padding, "
     "output_padding=output_padding)", "F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation)",
     Domain("conv", FLOATS, ("x", "w", "b"), shapes=_conv_transpose, limit=sqrt_max),
     ("NN.CONV_TRANSPOSE", "GRAD.CHECK.tensor", "GRAD.T.conv_transpose2d"), "CONV", "GRAD", grad_domain=finite_inputs,
     n=lambda case: case.inputs[0].shape[1] * case.inputs[1].shape[2] * case.inputs[1].shape[3] + 1),
  Op("dropout", "x.dropout(p)", "F.dropout(x, p, training=False)",
     Domain("elementwise", FLOATS, params=lambda shapes, dt: st.fixed_dictionaries({"p": st.sampled_from([0.0, 0.5])})),
     ("NN.DROPOUT", "GRAD.T.dropout"), "EXACT", "GRAD",
     note="outside training dropout is the identity; the random mask of training mode has no torch twin"),
  Op("layernorm", "x.layernorm(axis, 1e-5)", "F.layer_norm(x, trailing(x, axis), eps=1e-5)",
     Domain("reduce", FLOATS, shapes=_trailing_norm, limit=sqrt_max),
     ("NN.LAYERNORM", "GRAD.CHECK.tensor", "GRAD.T.layernorm"), "LAYERNORM", "GRAD",
     grad_dtypes=("bfloat16", "float32", "float64"),
     note="float16 gradients are not checked: the rule of RSQRT squares rsqrt(var + 1e-5) ~ 316, beyond float16",
     n=lambda case: reduced_count(case.inputs[0].shape, case.params["axis"])),
  Op("batchnorm", "x.batchnorm(w, b, m, s)", "(x - chan(m, x)) * chan(s, x) * chan(w, x) + chan(b, x)",
     Domain("elementwise", FLOATS, ("x", "w", "b", "m", "s"), shapes=_batchnorm, limit=sqrt_max),
     ("NN.BATCHNORM.F", "GRAD.CHECK.tensor", "GRAD.T.batchnorm"), "BATCHNORM", "GRAD", grad_domain=finite_inputs,
     note="gradients on finite inputs: with an infinity the order of the rule's sums decides inf - inf"),
  Op("scaled_dot_product_attention", "x.scaled_dot_product_attention(k, v, is_causal=causal)",
     "attention(x, k, v, causal)",
     Domain("matmul", FLOATS, ("x", "k", "v"), shapes=_attention, specials=False, lo=-3, hi=3),
     ("NN.ATTENTION", "GRAD.CHECK.tensor"), "ATTENTION", "GRAD",
     n=lambda case: case.inputs[1].shape[-2] * case.inputs[0].shape[-1],
     note="finite inputs: softmax of -inf rows and of infinite scores is checked by softmax's own entry; the "
          "reference is torch's formula written out (is_causal keeps j <= i)"),
  Op("one_hot", "x.one_hot(classes)", "F.one_hot(x.long(), classes)",
     Domain("elementwise", ("int32",), lo=0, hi=3, specials=False,
            params=lambda shapes, dt: st.fixed_dictionaries({"classes": st.integers(4, 5)})),
     ("NN.ONE_HOT",), out_dtype=fixed("int32"),
     note="default_int (int32) result, int64 in torch (DT.DEFAULT); labels inside [0, classes), where torch "
          "defines them"),
  Op("sequential", "x.sequential([lambda t: t.relu(), lambda t: t * 2])", "torch.relu(x) * 2",
     Domain("elementwise", FLOATS), ("NN.SEQUENTIAL", "GRAD.T.sequential"), "EXACT", "GRAD"),
  Op("assign", "x.assign(y)", "y.expand(x.shape).clone()",
     Domain("movement", FLOATS + ("int32", "bool"), ("x", "y"),
            shapes=lambda: S.shapes(0, 3, 0, 3).flatmap(lambda s: S.broadcast_to(s).map(lambda b: (s, b)))),
     ("UOP.ASSIGN",), "EXACT", note="the target is a realized buffer; the value broadcasts to its shape"),
  _loss("sparse_categorical_crossentropy", "x.sparse_categorical_crossentropy(y, -1, smoothing, reduction)",
        "F.cross_entropy(x.reshape(-1, x.shape[-1]), y.reshape(-1).long(), ignore_index=-1, reduction=reduction, "
        "label_smoothing=smoothing).reshape(y.shape if reduction == 'none' else ())",
        shapes=lambda: _scores_and_labels(True, lowest_label=-1),
        params=lambda shapes, dt: st.fixed_dictionaries({"reduction": _REDUCTION,
                                                         "smoothing": st.sampled_from([0.0, 0.1])}),
        clauses=("NN.LOSS.sparse_categorical_crossentropy", "NN.LOSS.smoothing",
                 "GRAD.T.sparse_categorical_crossentropy"),
        grad_domain=lambda case: bool((case.inputs[1] != -1).any()),
        note="gradients where some label is not ignored (the mean over no labels is 0/0)"),
  _loss("cross_entropy", "x.cross_entropy(y, reduction, smoothing)",
        "F.cross_entropy(x, y.long(), reduction=reduction, label_smoothing=smoothing)",
        shapes=lambda: _scores_and_labels(False),
        params=lambda shapes, dt: st.fixed_dictionaries({"reduction": _REDUCTION,
                                                         "smoothing": st.sampled_from([0.0, 0.1])}),
        clauses=("NN.LOSS.cross_entropy", "NN.LOSS.smoothing", "GRAD.T.cross_entropy")),
  _loss("cross_entropy.probs", "x.cross_entropy(y, reduction, smoothing)", "F.cross_entropy(x, y, reduction=reduction, "
        "label_smoothing=smoothing)", lambda: S.shapes(1, 3, 1, 4).map(lambda s: (s, s)), label=False,
        ranges={"y": (0.0, 1.0)}, api=(),
        params=lambda shapes, dt: st.fixed_dictionaries({"reduction": _REDUCTION,
                                                         "smoothing": st.sampled_from([0.0, 0.1])}),
        clauses=("NN.LOSS.cross_entropy", "GRAD.T.cross_entropy")),
  _loss("nll_loss", "x.nll_loss(y, None, ignore, reduction)", "F.nll_loss(x, y.long(), None, ignore_index=-100 if "
        "ignore is None else ignore, reduction=reduction)", shapes=lambda: _scores_and_labels(False),
        params=lambda shapes, dt: st.fixed_dictionaries({"reduction": _REDUCTION,
                                                                               "ignore": st.sampled_from([None, 0])}),
        clauses=("NN.LOSS.nll_loss", "GRAD.T.nll_loss")),
  _loss("binary_crossentropy", "x.binary_crossentropy(y, reduction)", "F.binary_cross_entropy(x, y, reduction="
        "reduction)", lambda: S.shapes(0, 3, 0, 4).map(lambda s: (s, s)), label=False,
        ranges={"x": (0.02, 0.98), "y": (0.0, 1.0)},
        params=lambda shapes, dt: st.fixed_dictionaries({"reduction": _REDUCTION}),
        clauses=("NN.LOSS.binary_crossentropy", "GRAD.T.binary_crossentropy")),
  _loss("binary_crossentropy_logits", "x.binary_crossentropy_logits(y, reduction)", "F.binary_cross_entropy_with_logits"
        "(x, y, reduction=reduction)", lambda: S.shapes(0, 3, 0, 4).map(lambda s: (s, s)), label=False,
        ranges={"x": (-6.0, 6.0), "y": (0.0, 1.0)},
        params=lambda shapes, dt: st.fixed_dictionaries({"reduction": _REDUCTION}),
        clauses=("NN.LOSS.binary_crossentropy_logits", "GRAD.T.binary_crossentropy_logits")),
]
