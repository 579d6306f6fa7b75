"""Put every failing test of one or more conformance report dirs into the cause groups of
docs/tinygrad-conformance.md (first matching rule wins) and print the totals, per-group counts, ops, dtypes and
properties; failures no rule matches are printed in full ('?').

Usage: python docs/runs/tinygrad_classify.py REPORT_DIR [REPORT_DIR ...] [-v] [--baseline FILE]
(issue 15's new ops: python docs/runs/tinygrad_classify.py FORWARD GRAD, the two parts of that run)
(the report: python docs/runs/tinygrad_classify.py RUN2 RUN3_BF16_AND_REST RUN3_CLANG_RERUN, see the doc)

Each group lists its failures' signatures (`signature`: a crash's signal, an exception's type, or the clause the
message names first with the kinds of the first differing value, e.g. `RW.FLOAT.none.div-self finite->nan`), so that
two defects of one op appear as two lines, and the fold tests' rules key on the clause and signature, not the op.

Each test's outcome is read from DIR/junit.xml (its properties carry the op, dtype, property and the failure
message); a test in a later dir replaces the same test in an earlier one, so a re-run of part of the suite (another
compiler, the tests an interrupted run did not reach) is laid over the first run. Writes groups.json (group -> test
ids) into the last dir, and with --baseline FILE every failure as a baseline for `pytest conformance --xfails-file
FILE` (CONF.BASELINE), the group as its reason."""
import collections
import json
import math
import os
import re
import sys
import xml.etree.ElementTree as ET

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
AUTOGRAD_API = tuple(f"test_{n}" for n in (
  "differentiation_runs_nothing", "dropout_gradient_is_the_mask", "equal_leaves_are_distinct", "grad_accumulates",
  "no_grad_results_are_constants", "one_hot_has_no_gradient", "only_floats_have_gradients", "realized_tensors",
  "requires_grad_and_no_grad", "seed_cotangent", "targets_without_a_cotangent"))
MAX_OPS = ("ALU.MAX", "maximum", "minimum", "max", "min", "max_pool2d", "argmax", "argmin", "GRAD.MAX.nan",
           "GRAD.REDUCE.MAX.nan")
ONE_ELEMENT = ("var", "std", "layernorm", "softmax", "log_softmax", "logsumexp")
# issue 15's entries (docs/tinygrad-conformance.md, "Issue 15: the new ops"); their rules come before the older ones,
# whose broader tests (op names containing "shift", messages containing "ACC.SIN") would otherwise take them
ROUNDED_QUOTIENT = ("div.floor", "div.trunc", "fmod", "mod.named")
ACCURACY_15 = ("acos", "acosh", "asin", "asinh", "atan", "atanh", "sinh", "cosh", "erf", "gelu.none", "celu", "mish",
               "logsigmoid", "hardsigmoid", "selu", "softsign", "quick_gelu", "hardswish", "logaddexp", "softmin",
               "lerp", "lerp.scalar", "log10")
PROMOTED_FILL = ("masked_fill", "pad.constant", "pad_to")


def has(m, *words): return any(w in m for w in words)


def _kind(v) -> str:
  """A value's kind in a failure signature: nan, inf, -inf, -0.0, 0.0, int, finite, True, False."""
  if isinstance(v, bool): return str(v)
  if isinstance(v, int): return "int"
  if v != v: return "nan"
  if v in (math.inf, -math.inf): return "inf" if v > 0 else "-inf"
  if v == 0: return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
  return "finite"


def _values(text):
  """A printed value or list of values (np.float64(x), nan, inf included) as Python values, or None."""
  text = re.sub(r"np\.\w+\(([^()]*)\)", r"\1", text.strip())
  text = re.sub(r"(?<![\w'.])(nan|inf)\b", r"float('\1')", text)
  try: return eval(text, {"__builtins__": {}, "float": float})  # noqa: S307 (a failure message's printed numbers)
  except Exception: return None   # noqa: BLE001 (not a value: the signature says so)


def signature(msg: str) -> str:
  """What a failure looks like, independent of the op's name, so that one op's two defects fall apart and one defect
  met through several ops comes together: a crash (its signal), an exception (its type), or the clause the message
  names first with the kinds of the first differing value ('finite->nan': got a finite number where torch has NaN)."""
  if has(msg, "SIGFPE"): return "crash SIGFPE"
  msg = msg.removeprefix("AssertionError: ")   # the test's own verdict, not an exception of the implementation
  m = re.search(r"raised (\w+)|^(\w+(?:Error|Exception))\b", msg)
  if m: return f"raises {m.group(1) or m.group(2)}"
  msg = re.sub(r"np\.\w+\(([^()]*)\)", r"\1", msg)   # np.float64(1.0) -> 1.0
  clause = (re.search(r"\b([A-Z]{2,}\.[A-Za-z0-9_.\-]+)", msg) or re.search(r"()", msg)).group(1)
  pair = re.search(r"got (\[[^\]]*\]|[^,\s]+), want (\[[^\]]*\]|[^,\s;]+)(?: \(first difference at index (\d+)\))?",
                   msg)
  pair = pair or re.search(r"= ([^,\s]+), the table says ([^,;\s]+)()", msg)   # an edge-table row's verdict
  if not pair: return f"{clause} other"
  got, want = _values(pair.group(1)), _values(pair.group(2))
  if isinstance(got, list) and isinstance(want, list) and pair.group(3) is not None:
    i = int(pair.group(3))
    got, want = (got[i] if i < len(got) else None), (want[i] if i < len(want) else None)
  if isinstance(got, (int, float)) and isinstance(want, (int, float)): return f"{clause} {_kind(got)}->{_kind(want)}"
  return f"{clause} values"


RULES = [  # (group number and name, predicate(op, dtype, property, message)); the first that matches wins
  ("0 bfloat16 needs clang >= 17", lambda o, dt, p, m: has(m, "CalledProcessError") and dt == "bfloat16"),
  ("1 int division by zero (bug: SIGFPE, or clang's value for a constant 0)",
   lambda o, dt, p, m: has(m, "SIGFPE") or (o == "rfloordiv" and dt in INTS)
   or has(m, "tdiv(tdiv(x, 0), 2)")),
  # ---- issue 16's fold tests (conformance/tests/test_folds.py): keyed on the fold clause the message names first and
  # on the failure's signature, since one fold case may meet two defects (a wrap, a division by zero)
  ("72 PYTHON device: float->int cast of inf or NaN raises (bug)",
   lambda o, dt, p, m: has(signature(m), "raises OverflowError", "raises ValueError")
   and (has(m, "cast(") or o == "ALU.CAST")),
  ("80 PYTHON device: integer division by zero gives a value, not the spec's",
   lambda o, dt, p, m: o in ("ALU.CDIV", "ALU.CMOD") and bool(re.search(r"C(DIV|MOD)\([^)]*, 0\)", m))),
  ("81 PYTHON device: no FDIV UOp", lambda o, dt, p, m: o == "ALU.FDIV" and has(m, "KeyError")),
  ("18 abs/round -0 (bug)", lambda o, dt, p, m: o == "ALU.TRUNC" and has(signature(m), "0.0->-0.0")),
  ("82 PYTHON device: POW edge rows raise ValueError (unconfirmed)",
   lambda o, dt, p, m: o == "ALU.POW" and has(signature(m), "raises ValueError")),
  ("71 integer comparison rewritten without its overflow guard (bug)",
   lambda o, dt, p, m: has(m, "RW.IDX.lt-add-const:")),
  ("73 float64 momentum optimizers: assign dtype mismatch (bug)", lambda o, dt, p, m: o.startswith("optim.")
   and has(m, "assign dtype mismatch")),
  ("76 LARS fused: one trust ratio over all parameters (bug)", lambda o, dt, p, m: o == "optim.LARS.fused"),
  ("74 optimizers: bias corrections, float64 state and lr products in float32 (tolerance)", lambda o, dt, p, m: (o in (
   "optim.Adam", "optim.AdamW", "optim.LAMB", "optim.OptimizerGroup") or (o.startswith("optim.") and dt == "float64"))
   and has(m, "ACC.OPTIM")),
  ("5 float folds", lambda o, dt, p, m: o == "program" and has(signature(m), "CONF.PROGRAM 0.0->nan")),
  ("77 BatchNorm momentum=None, conv padding='valid' (API)", lambda o, dt, p, m: (o.startswith("nn.BatchNorm")
   and has(m, "NoneType")) or (o.startswith("nn.Conv") and has(m, "'valid'"))),
  ("78 max/min of an empty axis returns a value", lambda o, dt, p, m: o in ("max", "min") and p == "reduce_edges"
   and has(m, "DID NOT RAISE IndexError")),
  ("79 sum of -0.0s is -0.0", lambda o, dt, p, m: o == "sum" and p == "reduce_edges"
   and has(signature(m), "-0.0->0.0")),
  ("69 fused int8 arithmetic not wrapped before // and % on CPU (bug)",
   lambda o, dt, p, m: o.startswith("fold.") and has(m, "RW.IDX.") and not has(m, "tdiv(x * 0, 0)")),
  ("3 float->int cast", lambda o, dt, p, m: bool(re.match(r"fold\.float\d+-u?int", o))),
  ("5 float folds", lambda o, dt, p, m: o.startswith("fold.") and has(m, "RW.FLOAT.none.", "RW.BOUNDS.const:",
                                                                      "tdiv(x * 0, 0)")),
  # ---- issue 15 (the new ops): keyed on the new entries' names, so the older groups' counts do not change
  ("32 sort of a 0-d tensor (bug)", lambda o, dt, p, m: o in ("sort", "sort.indices", "argsort") and has(m, "IndexError")),
  ("34 topk sorted_=False (API)", lambda o, dt, p, m: o.startswith("topk") and has(m, "sorted_=False")),
  ("35 Tensor.cat of a list (API)", lambda o, dt, p, m: o == "cat.sequence" and has(m, "_resolve_dim")),
  ("36 scatter reduce= with a tensor src (API)", lambda o, dt, p, m: o == "scatter.reduce" and has(m, "non-scalar src")),
  ("37 masked_select broadcasts only the mask", lambda o, dt, p, m: o.startswith("masked_select") and has(m, "broadcast")),
  ("38 cummax/cummin tie index", lambda o, dt, p, m: o in ("cummax.indices", "cummin.indices")),
  ("39 scalar fill value promotes", lambda o, dt, p, m: o in PROMOTED_FILL and dt in INTS and has(m, "has dtype")),
  ("40 scatter_reduce mean of ints is float", lambda o, dt, p, m: o == "scatter_reduce.mean" and has(m, "has dtype")),
  ("41 scatter_reduce sum widens small ints (bug)", lambda o, dt, p, m: o == "scatter_reduce.sum" and has(m, "has dtype")),
  ("22 prod keeps small ints", lambda o, dt, p, m: o == "cumprod" and dt in INTS + ("bool",) and has(m, "has dtype")),
  ("42 logcumsumexp of a 0-d int stays int", lambda o, dt, p, m: o == "logcumsumexp" and has(m, "has dtype")),
  ("43 ufix gives weak dtypes", lambda o, dt, p, m: o.startswith("ufix") and has(m, "has dtype")),
  ("45 asinh, logsigmoid at -inf (bug)", lambda o, dt, p, m: o in ("asinh", "logsigmoid")
   and has(m, "got np.float64(nan), want np.float64(-inf)")),
  ("46 hardsigmoid of large inputs (bug)", lambda o, dt, p, m: o == "hardsigmoid" and p == "forward"
   and has(m, "want np.float64(1.0)")),
  ("47 isclose of unsigned ints wraps (bug)", lambda o, dt, p, m: o == "isclose" and dt.startswith("uint")),
  ("48 reversed shift by a Python int (bug)", lambda o, dt, p, m: o == "lshift.reverse" and has(m, "verification")),
  ("4 shift count", lambda o, dt, p, m: o in ("lshift.named", "rshift.named")),
  ("7 // % on the rounded quotient, finite operands too", lambda o, dt, p, m: o in ROUNDED_QUOTIENT and dt in FLOATS),
  ("6 sin/pow accuracy", lambda o, dt, p, m: o == "pow.keyword" and has(m, "ACC.POW")),
  ("5 float folds", lambda o, dt, p, m: o == "uprod" and has(m, "want np.float64(nan)")),
  ("49 float16 chains computed in float32 (bug)", lambda o, dt, p, m: o in ("usum", "usum.list", "uprod")
   and dt == "float16"),
  ("50 matmul(dtype=) products widened by fusion (bug)", lambda o, dt, p, m: o == "matmul.dtype"),
  ("51 diagonal offset beyond the matrix (bug)", lambda o, dt, p, m: o == "diagonal" and has(m, "invalid shrink")),
  ("52 unfold of an empty axis (bug)", lambda o, dt, p, m: o == "unfold" and has(m, "ZeroDivisionError")),
  ("53 rearrange with ... (bug)", lambda o, dt, p, m: o == "rearrange" and has(m, "IndexError")),
  ("54 sequence index of bool gives int (bug)", lambda o, dt, p, m: o == "getitem.sequence" and dt == "bool"),
  ("55 scatter with an empty index (bug)", lambda o, dt, p, m: o == "scatter" and has(m, "has shape")),
  ("56 normalize p=inf (bug)", lambda o, dt, p, m: o == "normalize" and has(m, "OverflowError")),
  ("57 svd of a matrix with one column (bug)", lambda o, dt, p, m: o == "svd" and has(m, "not enough values")),
  ("58 pad with value -0.0 (bug)", lambda o, dt, p, m: o == "pad.constant" and has(m, "want np.float64(-0.0)")),
  ("59 max_unpool2d loses -0.0 (bug)", lambda o, dt, p, m: o == "max_unpool2d" and has(m, "want np.float64(-0.0)")),
  ("2 MAX NaN / -0", lambda o, dt, p, m: o == "max_pool2d.indices"),
  ("20 padding zeros x inf", lambda o, dt, p, m: o == "conv2d.negative-padding" and p == "forward"),
  ("60 interpolate at infinities", lambda o, dt, p, m: o.startswith("interpolate") and has(m, "nan")),
  ("61 float64 interpolate weights in float32 (bug)", lambda o, dt, p, m: o == "interpolate" and dt == "float64"),
  ("55 scatter with an empty index (bug)", lambda o, dt, p, m: o == "scatter" and p in ("vjp", "fd")
   and has(m, "shape")),
  ("5 float folds", lambda o, dt, p, m: o == "var_mean" and has(m, "want np.float64(nan)")),
  ("62 cummax/cummin gradient at an infinity (bug)", lambda o, dt, p, m: o in ("cummax", "cummin") and p == "vjp"),
  ("63 nearest interpolate's gradient (bug)", lambda o, dt, p, m: o == "interpolate.nearest" and p in ("vjp", "fd")),
  ("64 float16 gradient kernel clang 14 rejects", lambda o, dt, p, m: dt == "float16" and has(m, "CalledProcessError")),
  ("65 logcumsumexp float16 gradient NaN", lambda o, dt, p, m: o == "logcumsumexp" and p == "vjp"),
  ("66 atan, asin, acos, erf: gradient 0 at 0 (bug)", lambda o, dt, p, m: o in ("atan", "asin", "acos", "erf")
   and p == "vjp" and has(m, "got np.float64(0.0)")),
  ("67 one-sided gradients at a kink or NaN", lambda o, dt, p, m: (o == "selu" and p == "vjp")
   or (o == "hardsigmoid" and p == "vjp")),
  ("68 celu, asinh: NaN gradient at large |x| (bug)", lambda o, dt, p, m: o in ("celu", "asinh") and p == "vjp"
   and has(m, "got np.float64(nan)")),
  ("44 accuracy of the math compositions", lambda o, dt, p, m: o in ACCURACY_15 and has(m, "ACC.")),
  ("6 sin/pow accuracy", lambda o, dt, p, m: has(m, "OP.POW.special:")),
  ("29 casts rounded twice", lambda o, dt, p, m: o == "test_cast_rounded_once" or has(m, "OP.CAST.int-to-float")
   or (o == "ALU.CAST" and has(m, "ACC.EXACT"))),
  ("14 int pow (bug)", lambda o, dt, p, m: o in ("pow", "rpow", "ALU.POW", "POW") and dt not in FLOATS),
  ("2 MAX NaN / -0", lambda o, dt, p, m: o in MAX_OPS and dt in FLOATS + ("*",) and not has(m, "has shape")),
  ("3 float->int cast", lambda o, dt, p, m: ((has(o, "CAST", "cast") or o in ("int", "long", "short", "char", "byte"))
                                             and p != "vjp" and "GRAD" not in o) or has(m, "CAST(nan, int")),
  ("4 shift count", lambda o, dt, p, m: has(o, "SHL", "SHR", "shift")),
  ("15 relu6 large (bug)", lambda o, dt, p, m: o == "relu6" and p == "forward"),
  ("16 elu grad at 0 (bug)", lambda o, dt, p, m: o == "elu" and p != "forward"),
  ("8 kink gradients", lambda o, dt, p, m: o in ("hardtanh", "relu6", "leaky_relu") and p != "forward"),
  ("9 relu(-0)", lambda o, dt, p, m: o in ("relu", "sequential")),
  ("10 scce ignore", lambda o, dt, p, m: o == "sparse_categorical_crossentropy"),
  ("11 bce log(1-x), no clamp",
   lambda o, dt, p, m: o in ("binary_crossentropy", "test_binary_crossentropy_special_points")),
  ("12 nll_loss unbatched", lambda o, dt, p, m: o == "nll_loss"),
  ("17 logsumexp axes (bug)", lambda o, dt, p, m: o == "logsumexp" and has(m, "TypeError")),
  ("13 API", lambda o, dt, p, m: o in ("squeeze", "rmatmul") or (o in ("argmax", "argmin") and has(m, "shape"))),
  ("25 autograd API of 0.14", lambda o, dt, p, m: o in AUTOGRAD_API),
  ("18 abs/round -0 (bug)", lambda o, dt, p, m: o in ("abs", "round") and dt in FLOATS),
  ("19 round int dtype", lambda o, dt, p, m: o == "round"),
  ("7 // % on the rounded quotient, finite operands too",
   lambda o, dt, p, m: o in ("floordiv", "mod", "rfloordiv", "rmod") and dt in FLOATS),
  ("21 cos, tan; sin of huge |x| (bug)", lambda o, dt, p, m: o in ("cos", "tan") or (o == "sin" and p == "vjp")
   or (o == "sin" and has(m, "got np.float64(-0.0), want", "got np.float64(0.0), want"))),
  ("30 log2 of negative subnormal (bug)", lambda o, dt, p, m: has(m, "LOG2(-tiny)")),
  ("6 sin/pow accuracy", lambda o, dt, p, m: has(m, "ACC.SIN", "ACC.POW", "ACC.EXP2", "ACC.LOG2")),
  ("5 float folds", lambda o, dt, p, m: (o in ("rtruediv", "rsub", "rmul", "radd", "truediv", "div", "mul", "sub")
                                         or (o in ONE_ELEMENT and has(m, "want np.float64(nan)")))),
  ("20 padding zeros x inf", lambda o, dt, p, m: o in ("conv2d", "conv_transpose2d") and p == "forward"),
  ("22 prod keeps small ints", lambda o, dt, p, m: o == "prod" and dt in INTS),
  ("23 weak scalar compared by value", lambda o, dt, p, m: o == "clip" and dt.startswith("uint")),
  ("24 NEG of bool", lambda o, dt, p, m: has(o, "OP.NEG.bool") or has(m, "OP.NEG.bool")),
  ("26 gradient through int cast (bug)", lambda o, dt, p, m: o == "GRAD.NONDIFF.none"),
  ("28 BITCAST between sizes", lambda o, dt, p, m: has(m, "OP.BITCAST.size")),
  ("31 float16 accumulator never initialized (bug)",
   lambda o, dt, p, m: o == "conv2d" and dt == "float16" and p == "vjp"),
  ("27 unflatten -1 of empty (bug)", lambda o, dt, p, m: o == "unflatten" and has(m, "ZeroDivisionError")),
]


def read(d):
  """{test id: (outcome, op, dtype, property, message)} from DIR/junit.xml."""
  out = {}
  for tc in ET.parse(f"{d}/junit.xml").getroot().iter("testcase"):
    if tc.get("classname") is None: continue   # an entry pytest leaves for a test cut off by Ctrl-C
    tid = tc.get("classname").replace(".", "/") + ".py::" + tc.get("name")
    props = {p.get("name"): p.get("value") for p in tc.iter("property")}
    kids = {c.tag: c for c in tc if c.tag != "properties"}
    outcome = "fail" if ("failure" in kids or "error" in kids) else "skip" if "skipped" in kids else "pass"
    msg = ""
    if outcome == "fail":
      failure = json.loads(props.get("conformance_outcomes") or "{}").get("failure")
      bad = kids.get("failure", kids.get("error"))
      msg = (failure or bad.get("message") or "").split("\n--- reproduction ---")[0]
    name = tc.get("name")
    op = props.get("op") or name.split("[")[0]
    param = name.split("[", 1)[1].rstrip("]") if "[" in name else ""
    dtype = props.get("dtype") or (param if param in FLOATS + INTS else "")   # a clause test's dtype parameter
    out[tid] = (outcome, op, dtype, props.get("property", op), msg)
  return out


def main(argv):
  baseline = argv[argv.index("--baseline") + 1] if "--baseline" in argv else None
  dirs = [a for a in argv if not a.startswith("-") and a != baseline]
  tests = {}
  for d in dirs: tests.update(read(d))
  print("totals", dict(collections.Counter(t[0] for t in tests.values())), "of", len(tests), "tests")
  groups = collections.defaultdict(list)
  for tid, (outcome, op, dt, prop, msg) in tests.items():
    if outcome != "fail": continue
    g = next((g for g, pred in RULES if pred(op, dt, prop, msg)), "?")
    groups[g].append((op, dt, prop, tid, msg))
  for g, items in sorted(groups.items(), key=lambda kv: (kv[0] == "?", -len(kv[1]))):
    print(f"== {g}: {len(items)} | ops {sorted({i[0] for i in items})} | dtypes {sorted({i[1] for i in items})} | "
          f"props {sorted({i[2] for i in items})}")
    # the group's failure signatures: two defects of one op show as two lines even where a rule files them together
    for sig, n in collections.Counter(signature(i[4]) for i in items).most_common():
      print(f"     {n:4d}  {sig}  ({', '.join(sorted({i[0] for i in items if signature(i[4]) == sig})[:6])})")
    if g == "?" or "-v" in argv:
      for i in items: print("   ", i[3], "::", i[4].replace("\n", " ")[:240])
  json.dump({g: sorted(i[3] for i in items) for g, items in groups.items()}, open(f"{dirs[-1]}/groups.json", "w"),
            indent=1)
  if baseline:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    from conformance.baselines import write
    write(baseline, {i[3]: f"group {g}" for g, items in groups.items() for i in items},
          f"tinygrad's expected failures (docs/tinygrad-conformance.md, 'Failures by cause'), one line per failing test\n"
          f"of the report dirs {' '.join(dirs)}, the reason its cause group;\n"
          f"written by: python docs/runs/tinygrad_classify.py <those runs' report dirs> --baseline FILE\n"
          f"use: pytest conformance --impl conformance.adapters.tinygrad:TinygradAdapter --xfails-file FILE")


if __name__ == "__main__":
  main(sys.argv[1:])
