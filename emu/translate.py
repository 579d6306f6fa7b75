"""Translate a LinearProgram once into Python source over numpy arrays (DEV.COMPILE for PYTHON).

Each UOp at position i becomes one line assigning `v<i>`; values are arrays over the launch's threads (runtime.py).
RANGE loops become Python `for` loops, except a loop nest that *can run vectorized* (vectorize.py): its iterations
get their own array axes and its register accumulators are folded along them in one call, left to right.
`Compiled.source` is the generated code; DEBUG>=3 prints it."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from refimpl.device import LinearProgram
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError, getenv
from refimpl.uop import GroupOp, Ops
from refimpl.uop.ops import UOp
from refimpl.uop.semantics import exec_alu
from emu import runtime, valu
from emu.check import Structure, check_program
from emu.liveness import free_dead_values
from emu.vectorize import find_regions

_IDENTITY = {Ops.ADD: 0, Ops.MUL: 1}


def identity(op: Ops, dt):
  """The identity of a REDUCE op (EXEC.THREAD.reduce): 0 / 1 / the least value, False / True for bool."""
  if dt == dtypes.bool: return op is Ops.MUL
  return dtypes.as_const(_IDENTITY.get(op, dtypes.min(dt)), dt)


@dataclass
class Compiled:
  program: LinearProgram
  source: str
  fn: object
  st: Structure
  scratch: list = field(default_factory=list)   # (pos, DEFINE_LOCAL/DEFINE_REG uop)

  @property
  def name(self) -> str: return self.program.name

  def line(self, pos: int) -> str:
    """UOp `pos` printed as a line of the program listing (position, op, dtype, sources by position, arg)."""
    u = self.program.uops[pos]
    srcs = ", ".join(str(self.st.pos[s]) for s in u.src)
    return f"UOp #{pos} {u.op.name} {u.dtype!r} ({srcs})" + (f" arg={u.arg!r}" if u.arg is not None else "")


def eval_scalar(u: UOp, vals: dict[str, int]):
  """The value of a SPECIAL size: CONSTs, DEFINE_VARs and ALU ops only, computed with exec_alu (EXEC.GRID.special)."""
  if u.op is Ops.CONST: return u.arg
  if u.op is Ops.DEFINE_VAR: return vals[u.arg[0]]
  if u.op in GroupOp.ALU or u.op in (Ops.CAST, Ops.BITCAST):
    src_dt = u.src[-1].dtype if u.op is not Ops.WHERE else u.src[1].dtype
    return exec_alu(u.op, u.dtype, [eval_scalar(s, vals) for s in u.src], src_dt)
  raise SpecError("EXEC.GRID.special", f"a SPECIAL size may use CONST, DEFINE_VAR and ALU ops only, not {u.op.name}")


class _Writer:
  """Builds the source of `kernel(k)`; `env` holds the constants and functions the lines name."""
  def __init__(self, program: LinearProgram, st: Structure):
    self.p, self.st, self.lines, self.env, self.depth = program, st, [], {"np": np}, 1
    self.regions = find_regions(program, st)
    self.spans: list[tuple[int, int, int]] = []   # lines of each region: (vectorized from, to, its fallback to)

  def emit(self, line: str) -> None: self.lines.append("  " * self.depth + line)

  def name(self, obj, prefix: str) -> str:
    key = f"{prefix}{len(self.env)}"
    self.env[key] = obj
    return key

  # ---- blocks ----
  def block(self, lo: int, hi: int, m: str, vec: dict | None) -> None:
    """Emit positions lo..hi-1 under mask variable `m`; `vec` is the state of an enclosing vectorized nest."""
    i = lo
    while i < hi:
      u = self.p.uops[i]
      if u.op is Ops.RANGE:
        end = self.st.close[i]
        if vec is not None: self.vec_range(i, end, m, vec)
        elif i in self.regions: self.region(i, end, m)
        else: self.loop(i, end, m)
        i = end + 1
      elif u.op is Ops.IF:
        end = self.st.close[i]
        mi = f"m{i}"
        self.emit(f"{mi} = np.logical_and({m}, {self.ref(u.src[0], vec)})")
        self.emit(f"if {mi}.any():")
        self.depth += 1
        self.emit("pass")
        self.block(i + 1, end, mi, vec)
        self.depth -= 1
        i = end + 1
      else:
        self.op(i, u, m, vec)
        i += 1

  def ref(self, s: UOp, vec: dict | None = None) -> str:
    """The name of a source's value (one from outside a vectorized nest broadcasts against the nest's axes as it
    is: the threads are the last axis, runtime.py)."""
    return f"v{self.st.pos[s]}"

  def loop(self, i: int, end: int, m: str) -> None:
    """A RANGE as a Python loop (EXEC.THREAD.range); threads whose end is smaller drop out of the mask."""
    u = self.p.uops[i]
    e = self.ref(u.src[0], None)
    t = self.name(valu.NP[u.dtype], "t")
    for r in self.st.reduces_opened_at.get(i, []): self.reduce_init(r)
    self.emit(f"n{i}, u{i} = k.trip({e}, {m})")
    self.emit(f"for r{i} in range(n{i}):")
    self.depth += 1
    self.emit(f"v{i} = {t}(r{i})")
    self.emit(f"m{i} = {m} if u{i} else np.logical_and({m}, v{i} < {e})")
    self.block(i + 1, end, f"m{i}", None)
    for r in self.st.reduces_closed_at.get(i, []): self.reduce_step(r, f"m{i}")
    self.depth -= 1

  def region(self, i: int, end: int, m: str) -> None:
    """A loop nest that may run vectorized: decided at run time (uniform trip counts, size), else a Python loop."""
    ranges = self.regions[i]
    ends = ", ".join(self.ref(self.p.uops[r].src[0], None) for r in ranges)
    self.emit(f"ns{i} = k.vec_ok(({ends},), {m})")
    self.emit(f"if ns{i} is not None:")
    self.depth += 1
    vec = {"nd": len(ranges), "ranges": ranges, "m": m, "ns": f"ns{i}"}
    lo = len(self.lines)
    self.vec_range(i, end, m, vec)
    for r in self.st.reduces_of_region(ranges): self.reduce_vec(r, vec)
    hi = len(self.lines)
    self.depth -= 1
    self.emit("else:")
    self.depth += 1
    self.loop(i, end, m)
    self.depth -= 1
    self.spans.append((lo, hi, len(self.lines)))

  def vec_range(self, i: int, end: int, m: str, vec: dict) -> None:
    u = self.p.uops[i]
    depth = vec["ranges"].index(i)
    t = self.name(valu.NP[u.dtype], "t")
    self.emit(f"v{i} = k.axis({vec['ns']}[{depth}], {t}, {depth}, {vec['nd']})")
    self.block(i + 1, end, m, vec)

  # ---- reductions (EXEC.THREAD.reduce) ----
  def reduce_init(self, r: int) -> None:
    u = self.p.uops[r]
    ident = self.name(valu.to_storage([identity(u.arg, u.dtype.scalar())], u.dtype.scalar())[0], "c")
    n = u.dtype.count
    self.emit(f"v{r} = np.full(k.T, {ident})" if n == 1 else f"v{r} = tuple(np.full(k.T, {ident}) for _ in range({n}))")

  def reduce_step(self, r: int, m: str) -> None:
    u = self.p.uops[r]
    f = self.name(valu.alu(u.arg, u.dtype.scalar()), "f")
    v = f"v{self.st.pos[u.src[0]]}"
    if u.dtype.count == 1: self.emit(f"v{r} = np.where({m}, {f}(v{r}, {v}), v{r})")
    else: self.emit(f"v{r} = tuple(np.where({m}, {f}(a, b), a) for a, b in zip(v{r}, {v}))")

  def reduce_vec(self, r: int, vec: dict) -> None:
    u = self.p.uops[r]
    fold = self.name(valu.fold, "fold")
    ident = self.name(valu.to_storage([identity(u.arg, u.dtype.scalar())], u.dtype.scalar())[0], "c")
    op, dt = self.name(u.arg, "op"), self.name(u.dtype.scalar(), "dt")
    one = f"{fold}({op}, {dt}, {ident}, k.per_thread(%s, {vec['ns']}))"
    v = f"v{self.st.pos[u.src[0]]}"
    self.emit(f"v{r} = " + (one % v if u.dtype.count == 1 else f"tuple({one % 'x'} for x in {v})"))

  # ---- single UOps ----
  def op(self, i: int, u: UOp, m: str, vec: dict | None) -> None:
    if vec is not None and i in self.st.acc_skip: return   # the accumulator's LOAD and ALU: folded at its STORE
    src = [self.ref(s, vec) for s in u.src]
    if u.op is Ops.CONST: self.emit(f"v{i} = {self.name(valu.to_storage([u.arg], u.dtype)[0], 'c')}")
    elif u.op is Ops.DEFINE_GLOBAL: self.emit(f"v{i} = k.glob[{u.arg}]")
    elif u.op in (Ops.DEFINE_LOCAL, Ops.DEFINE_REG): self.emit(f"v{i} = k.mem[{i}]")
    elif u.op is Ops.DEFINE_VAR: self.emit(f"v{i} = {self.name(valu.NP[u.dtype], 't')}(k.vals[{u.arg[0]!r}])")
    elif u.op is Ops.SPECIAL:
      self.emit(f"v{i} = k.special({u.arg!r}, {self.name(valu.NP[u.dtype], 't')})")
    elif u.op is Ops.INDEX: self.emit(f"v{i} = Addr({src[0]}, {src[1]}, {src[2] if len(src) > 2 else None})")
    elif u.op is Ops.LOAD: self.emit(f"v{i} = k.load({i}, {m}, {src[0]})")
    elif u.op is Ops.STORE:
      if vec is not None and i in self.st.acc_stores:
        ld, alu, v = self.st.acc_stores[i]
        op, dt = self.name(self.p.uops[alu].op, "op"), self.name(u.src[1].dtype, "dt")
        addr, value = f"v{self.st.pos[u.src[0]]}", self.ref(v, vec)
        self.emit(f"k.acc_fold({ld}, {i}, {vec['m']}, {addr}, {op}, {dt}, {value}, {vec['ns']})")
      else: self.emit(f"k.store({i}, {m}, {src[0]}, {src[1]})")
    elif u.op is Ops.BARRIER: self.emit(f"k.barrier({i}, {m})")
    elif u.op in (Ops.END, Ops.ENDIF, Ops.REDUCE): pass   # loops close by dedent; REDUCE values are made at END
    elif u.op is Ops.VECTORIZE: self.emit(f"v{i} = ({', '.join(src)},)" if len(src) > 1 else f"v{i} = {src[0]}")
    elif u.op is Ops.GEP:
      if u.src[0].dtype.count == 1: self.emit(f"v{i} = {src[0]}")
      elif len(u.arg) == 1: self.emit(f"v{i} = {src[0]}[{u.arg[0]}]")
      else: self.emit(f"v{i} = ({', '.join(f'{src[0]}[{j}]' for j in u.arg)},)")
    elif u.op in GroupOp.ALU or u.op in (Ops.CAST, Ops.BITCAST): self.alu(i, u, src)
    else: raise SpecError("EXEC.PROGRAM.order", f"{u.op.name} cannot appear in a linear program")

  def alu(self, i: int, u: UOp, src: list[str]) -> None:
    """EXEC.THREAD.value: valu's exact op; vectors lane by lane (BITCAST between lane counts via the bytes)."""
    src_dt = u.src[1].dtype if u.op is Ops.WHERE else u.src[0].dtype
    n = max(u.dtype.count, src_dt.count)
    if u.op is Ops.BITCAST and u.dtype.count != src_dt.count:
      f = self.name(_vec_bitcast(src_dt, u.dtype), "f")
      self.emit(f"v{i} = {f}({src[0]})")
      return
    f = self.name(valu.alu(u.op, u.dtype.scalar(), src_dt.scalar()), "f")
    if n == 1: self.emit(f"v{i} = {f}({', '.join(src)})")
    else: self.emit(f"v{i} = (" + "".join(f"{f}({', '.join(f'{s}[{j}]' for s in src)}), " for j in range(n)) + ")")


def _vec_bitcast(src_dt, dst_dt):
  """BITCAST between dtypes of equal total size and different lane counts (UOP.BITCAST.size): lanes -> bytes -> lanes
  (OP.BITCAST.nan: NaN lanes are canonicalised first, as exec_alu's bits are)."""
  def fn(x):
    lanes = x if src_dt.count > 1 else (x,)
    bits = np.stack(np.broadcast_arrays(*[valu.to_bits(v, src_dt.scalar()) for v in lanes]), axis=-1)
    out = valu.from_bits(np.ascontiguousarray(bits).view(valu._UINT[dst_dt.scalar().itemsize]), dst_dt.scalar())
    return tuple(out[..., j] for j in range(dst_dt.count)) if dst_dt.count > 1 else out[..., 0]
  return fn


def translate(program: LinearProgram) -> Compiled:
  """Check the program (EXEC.PROGRAM, EXEC.GRID.special) and translate it into `kernel(k)`."""
  st = check_program(program)
  w = _Writer(program, st)
  w.block(0, len(program.uops), "m0", None)
  body = "\n".join(free_dead_values(w.lines, w.spans)) or "  pass"
  source = f"def kernel(k):\n  m0 = k.mask0\n{body}\n"
  env = {**w.env, "Addr": runtime.Addr}
  exec(compile(source, f"<emu {program.name}>", "exec"), env)
  if getenv("DEBUG", 0) >= 3: print(f"// emu: {program.name}\n{source}")
  scratch = [(i, u) for i, u in enumerate(program.uops) if u.op in (Ops.DEFINE_LOCAL, Ops.DEFINE_REG)]
  return Compiled(program, source, env["kernel"], st, scratch)
