"""Put every failure of a conformance report dir into the cause groups of docs/tinygrad-conformance.md (first matching
rule wins) and print per-group counts, ops, dtypes and properties; failures no rule matches are printed in full
('?'). Usage: python docs/runs/tinygrad_classify.py REPORT_DIR [-v]"""
import collections, json, re, sys
d = sys.argv[1]
rep = json.load(open(f"{d}/conformance.json"))
FLOATS = ("float16", "bfloat16", "float32", "float64")
def has(m, *words): return any(w in m for w in words)
RULES = [  # (group number and name, predicate(op, dtype, property, message))
  ("1 int division SIGFPE", lambda o, dt, p, m: has(m, "SIGFPE")),
  ("14 int pow (bug)", lambda o, dt, p, m: o in ("pow", "rpow", "ALU.POW", "POW") and dt not in FLOATS),
  ("2 MAX NaN / -0", lambda o, dt, p, m: has(o, "MAX", "max", "min") and dt in FLOATS and p in ("forward", "alu", "edge_table")),
  ("3 float->int cast", lambda o, dt, p, m: (has(o, "CAST", "cast") or o in ("int", "long", "short", "char", "byte")) and p != "vjp"),
  ("4 shift count", lambda o, dt, p, m: has(o, "SHL", "SHR", "shift")),
  ("15 relu6 large (bug)", lambda o, dt, p, m: o == "relu6" and p == "forward"),
  ("16 elu grad at 0 (bug)", lambda o, dt, p, m: o == "elu" and p != "forward"),
  ("8 kink gradients", lambda o, dt, p, m: o in ("hardtanh", "relu6", "leaky_relu") and p != "forward"),
  ("9 relu(-0)", lambda o, dt, p, m: o == "relu"),
  ("10 scce ignore", lambda o, dt, p, m: o == "sparse_categorical_crossentropy"),
  ("11 bce accuracy", lambda o, dt, p, m: o == "binary_crossentropy"),
  ("12 nll_loss unbatched", lambda o, dt, p, m: o == "nll_loss"),
  ("17 logsumexp axes (bug)", lambda o, dt, p, m: o == "logsumexp" and has(m, "TypeError")),
  ("13 API", lambda o, dt, p, m: o in ("squeeze", "rmatmul") or (o in ("argmax", "argmin") and has(m, "shape"))),
  ("18 abs/round -0 (bug)", lambda o, dt, p, m: o in ("abs", "round") and dt in FLOATS),
  ("19 round int dtype", lambda o, dt, p, m: o == "round"),
  ("7 // % with inf", lambda o, dt, p, m: o in ("floordiv", "mod", "rfloordiv", "rmod") and dt in FLOATS),
  ("6 sin/pow accuracy", lambda o, dt, p, m: has(m, "ACC.SIN", "ACC.POW", "ACC.EXP2", "ACC.LOG2")),
  ("5 float folds", lambda o, dt, p, m: o in ("rtruediv", "rsub", "rmul", "truediv", "div", "mul", "sub") and dt in FLOATS),
]
groups = collections.defaultdict(list)
for r in rep["results"]:
  for f in r["failures"]:
    m = f["reproduction"] or ""
    head = m.split("\n--- reproduction ---")[0]
    g = next((g for g, pred in RULES if pred(r["op"], r["dtype"], r["property"], head)), "?")
    groups[g].append((r["op"], r["dtype"], r["property"], f["test"], head))
tot = collections.Counter()
for r in rep["results"]:
  for k in ("pass", "fail", "xfail", "skip"): tot[k] += r[k]
print("totals", dict(tot))
for g, items in sorted(groups.items(), key=lambda kv: (kv[0] == "?", -len(kv[1]))):
  print(f"== {g}: {len(items)} | ops {sorted({i[0] for i in items})} | dtypes {sorted({i[1] for i in items})} | "
        f"props {sorted({i[2] for i in items})}")
  if g == "?" or "-v" in sys.argv:
    for i in items: print("   ", i[0], i[1], i[2], "::", i[4].replace("\n", " ")[:240])
json.dump({g: [i[3] for i in items] for g, items in groups.items()}, open(f"{d}/groups.json", "w"), indent=1)
