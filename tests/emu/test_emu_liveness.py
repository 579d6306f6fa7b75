"""emu/liveness.py: each value of a generated kernel is freed (`del`) after the statement that names it last, never
before a later use: inside a loop or an if/else, a value is freed after the whole block."""
from emu.liveness import free_dead_values

BODY = """\
  v1 = c1
  v2 = f(v1)
  v3 = g(v2)
  v4 = np.full(k.T, c0)
  ns5 = k.vec_ok((v1,), m0)
  if ns5 is not None:
    v5 = k.axis(ns5[0], t, 0, 1)
    v6 = h(v3, v5)
    v7 = h(v6, v5)
    v4 = fold(v7)
  else:
    n5, u5 = k.trip(v1, m0)
    for r5 in range(n5):
      v5 = t(r5)
      v6 = h(v3, v5)
      v4 = h(v4, v6)
  k.store(9, m0, v2, v4)
  v10 = c2
""".splitlines()


def test_dels_after_last_use():
  lines = free_dead_values(BODY, [(6, 10, 16)])   # the vectorized region: lines 6..9, its loop form 10..14
  src = "\n".join(lines)
  namespace = {}
  exec(compile("def kernel(k):\n" + src + "\n", "<t>", "exec"), namespace)   # it is valid Python
  region = lines[lines.index("    v5 = k.axis(ns5[0], t, 0, 1)"):lines.index("  else:")]
  assert region == ["    v5 = k.axis(ns5[0], t, 0, 1)", "    v6 = h(v3, v5)", "    v7 = h(v6, v5)", "    del v5, v6",
                    "    v4 = fold(v7)", "    del v7"]   # v4 is assigned outside the region too: kept
  top = [line for line in lines if line.startswith("  ") and not line.startswith("   ")]
  assert top == ["  v1 = c1", "  v2 = f(v1)", "  v3 = g(v2)", "  v4 = np.full(k.T, c0)", "  ns5 = k.vec_ok((v1,), m0)",
                 "  if ns5 is not None:", "  else:", "  del v1, v3",   # last used inside the if/else: freed after it
                 "  k.store(9, m0, v2, v4)", "  del v2", "  v10 = c2", "  del v10"]   # v4: assigned 3 times, kept
