"""The C-style renderer base and the C renderer of the CPU device (spec/backends.md, DEV.C.*).

`CStyleLanguage` turns a linear program into one C-like kernel: one statement per UOp, values in variables named
after what they are (`gidx0`, `ridx0`, `acc0`, `val3`, `alu5`, `cast6`), constants inline. Every ALU op is rendered
so that it gives exactly the result of spec/ops.md for every input (OP.TOTAL): integer arithmetic is done in unsigned
types (DEV.C.wrap), division and shifts are guarded (DEV.C.cdiv, DEV.C.shift), float-to-int casts saturate
(DEV.C.cast), MAX propagates NaN (DEV.C.max), and float16/bfloat16 values are computed in float32 and rounded after
every op (DEV.C.half). What differs between C, OpenCL C and CUDA C sits in small hooks (type names, the kernel
signature, thread indices, barriers, local memory, math function names, 16-bit loads and stores), so the OpenCL and
CUDA renderers subclass this one. `CRenderer` is the CPU's: a plain C function that loops over its work-groups
itself (DEV.C.threads)."""
from __future__ import annotations

import re

from refimpl.device import LinearProgram
from refimpl.dtype import ConstType, DType, dtypes
from refimpl.helpers import SpecError
from refimpl.renderer import Renderer, bounds, check_program
from refimpl.renderer.exp2 import exp2_f32_source
from refimpl.uop import Ops
from refimpl.uop.ops import UOp

__all__ = ["CStyleLanguage", "CRenderer", "SHORT_NAMES"]

# short dtype names used in helper function names (`cdiv_i32`, `f2i_u8`)
SHORT_NAMES = {dtypes.bool: "bool", dtypes.int8: "i8", dtypes.uint8: "u8", dtypes.int16: "i16", dtypes.uint16: "u16",
               dtypes.int32: "i32", dtypes.uint32: "u32", dtypes.int64: "i64", dtypes.uint64: "u64",
               dtypes.float16: "f16", dtypes.bfloat16: "bf16", dtypes.float32: "f32", dtypes.float64: "f64"}
HALF_TYPES = (dtypes.float16, dtypes.bfloat16)
# float ops whose exact result a 16-bit float must be rounded back from (DEV.C.half); NEG, TRUNC, MAX and WHERE give
# one of their operands' values or an integer, which is already a value of the type
_ROUNDED = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.RECIPROCAL, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN,
                      Ops.POW})
_LIBM = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.POW: "pow", Ops.SQRT: "sqrt", Ops.TRUNC: "trunc"}
_CMP = {Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "=="}
_BITWISE = {Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^"}
_ARITH = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/"}


class _Kernel:
  """The state of rendering one program: statements, the C name of each value, the helpers it needs."""
  def __init__(self, lang: CStyleLanguage, program: LinearProgram, checked: bool = False):
    self.lang, self.p, self.checked = lang, program, checked   # checked: EXEC.BOUNDS.checked (renderer/bounds.py)
    self.lines: list[str] = []
    self.depth = 0
    self.names: dict[UOp, str] = {}
    self.index: dict[UOp, tuple[str, str, str | None]] = {}   # INDEX -> (array, index, gate or None)
    self.helpers: dict[str, str] = {}                            # name -> C definition, in dependency order
    self.locals: list[str] = []                                  # DEFINE_LOCAL declarations (work-group scope)
    self.counts: dict[str, int] = {}
    self.open_ranges: list[UOp] = []                             # RANGEs whose loop is open, innermost last
    self.stored = {s.src[0].src[0] for s in program.uops if s.op is Ops.STORE}   # buffers written to
    self.specials = {u.arg: u for u in program.uops if u.op is Ops.SPECIAL}
    self.pos = pos = {u: i for i, u in enumerate(program.uops)}
    # REDUCE (EXEC.THREAD.reduce): accumulator made before its outermost RANGE, folded before the innermost closes
    self.reduce_open: dict[UOp, list[UOp]] = {}
    self.reduce_fold: dict[UOp, list[UOp]] = {}
    for u in program.uops:
      if u.op is Ops.REDUCE:
        rs = sorted(u.src[1:], key=lambda r: pos[r])
        self.reduce_open.setdefault(rs[0], []).append(u)
        self.reduce_fold.setdefault(rs[-1], []).append(u)

  def emit(self, line: str) -> None: self.lines.append("  " * self.depth + line)

  def fresh(self, prefix: str) -> str:
    n = self.counts.get(prefix, 0)
    self.counts[prefix] = n + 1
    return f"{prefix}{n}"

  def need(self, name: str, text: str) -> str:
    """Use helper function `name`, defined by `text` (once, after the helpers it needs were defined)."""
    self.helpers.setdefault(name, text)
    return name


class CStyleLanguage(Renderer):
  """The shared C-like renderer. A subclass sets the hooks below for its language and writes `render_kernel`."""
  # ---- hooks: spelling
  helper_prefix = "static inline "   # before the return type of every helper function
  buffer_prefix = ""                 # address-space qualifier of buffer parameters (`__global ` in OpenCL)
  restrict = "restrict"              # slots never alias (EXEC.PROGRAM.params), so buffers are restrict pointers
  type_names: dict[DType, str] = {
    dtypes.bool: "bool", dtypes.int8: "int8_t", dtypes.uint8: "uint8_t", dtypes.int16: "int16_t",
    dtypes.uint16: "uint16_t", dtypes.int32: "int32_t", dtypes.uint32: "uint32_t", dtypes.int64: "int64_t",
    dtypes.uint64: "uint64_t", dtypes.float16: "uint16_t", dtypes.bfloat16: "uint16_t", dtypes.float32: "float",
    dtypes.float64: "double"}
  float_suffix = "f"                 # of float32 literals and math functions (`exp2f`)
  unroll_pragma = "#pragma GCC unroll {n}"   # before the loop of an unrolled RANGE (EXEC.OPT.unroll)

  def value_type(self, dt: DType) -> str:
    """The type of a C variable holding a value of `dt`. 16-bit floats are held as the float32 of their value
    (DEV.C.half), so arithmetic on them is float arithmetic followed by a rounding."""
    return "float" if dt in HALF_TYPES else self.type_names[dt]

  def storage_type(self, dt: DType) -> str:
    """The element type of a buffer of `dt` (its bytes are EXEC.MEMORY.bytes)."""
    return self.type_names[dt]

  def wide_unsigned(self, dt: DType) -> str:
    """The unsigned type integer arithmetic on `dt` is done in (DEV.C.wrap): at least 32 bits, so that C's integer
    promotions never turn it into signed int arithmetic."""
    return self.type_names[dtypes.uint64 if dt.itemsize == 8 else dtypes.uint32]

  def libm(self, op: Ops, dt: DType) -> str:
    """The math function of `op` (DEV.C.libm): the float32 one for float32 and 16-bit floats, else the double one."""
    return _LIBM[op] + ("" if dt == dtypes.float64 else self.float_suffix)

  # ---- hooks: the parts of a kernel that differ between languages
  def render_special(self, k: _Kernel, u: UOp) -> str:
    """The C name of SPECIAL `u`, declaring it if the language computes it (a GPU asks its built-ins)."""
    raise NotImplementedError

  def render_barrier(self, k: _Kernel, u: UOp) -> str:
    """The statement of a BARRIER that fences local and global memory (EXEC.BARRIER)."""
    raise NotImplementedError

  def render_local(self, name: str, dt: DType, size: int) -> str:
    """The declaration of a DEFINE_LOCAL array, one per work-group."""
    raise NotImplementedError

  def render_kernel(self, k: _Kernel, body: list[str]) -> str:
    """The whole source: includes, helpers, the kernel function around `body` (the program's statements)."""
    raise NotImplementedError

  def kernel_params(self, k: _Kernel) -> list[str]:
    """The buffer parameters in slot order (`const` when never stored to), in checking mode `bounds_info`, then the
    variables by name."""
    out = []
    for g in k.p.globals:
      const = "" if g in k.stored else "const "
      out.append(f"{self.buffer_prefix}{const}{self.storage_type(g.dtype.base)}* {self.restrict} data{g.arg}")
    if k.checked: out.append(bounds.param(self))
    return out + [f"{self.value_type(v.dtype)} {var_name(v)}" for v in k.p.vars]

  # checking mode (EXEC.BOUNDS.checked, renderer/bounds.py)
  def bounds_claim(self, f: str) -> str:
    """An expression true for the one thread that first claims the fault flag, word 0 of int64 array `f`."""
    return f"__atomic_exchange_n(&{f}[0], (int64_t)1, __ATOMIC_RELAXED) == 0"

  def bounds_thread_id(self, k: _Kernel, kind: str, d: int) -> str:
    """The value of gidx<d> (`kind` 'g') or lidx<d> ('l') anywhere in the kernel body."""
    raise NotImplementedError

  # 16-bit floats (DEV.C.half): how their bits become a float value and back; software conversions in C
  def half_from_bits(self, k: _Kernel, dt: DType, bits: str) -> str:
    """The exact float32 value of the 16-bit float `dt` whose bits are the expression `bits`."""
    return f"{self._h_to_f32(k, dt)}({bits})"

  def half_to_bits(self, k: _Kernel, dt: DType, value: str) -> str:
    """The bits of float32 expression `value` rounded to the 16-bit float `dt`, to nearest even."""
    return f"{self._h_from_f32(k, dt)}({value})"

  def render_load(self, k: _Kernel, dt: DType, element: str) -> str:
    """A global memory element as a value (16-bit floats: bits to float)."""
    return self.half_from_bits(k, dt, element) if dt in HALF_TYPES else element

  def render_store(self, k: _Kernel, dt: DType, value: str) -> str:
    """A value as a global memory element (16-bit floats: float to bits, exact as the value is a 16-bit value)."""
    return self.half_to_bits(k, dt, value) if dt in HALF_TYPES else value

  def render_bitcast(self, k: _Kernel, src: DType, dst: DType, x: str) -> str:
    """BITCAST between types of 4 or 8 bytes, at least one a float (OP.BITCAST): through memcpy in C."""
    s, d = SHORT_NAMES[src], SHORT_NAMES[dst]
    vs, vd = self.value_type(src), self.value_type(dst)
    return k.need(f"bitcast_{s}_{d}", f"{self.helper_prefix}{vd} bitcast_{s}_{d}({vs} x) {{ {vd} y; "
                  f"memcpy(&y, &x, sizeof y); return y; }}") + f"({x})"

  # ---- rendering
  def render(self, program: LinearProgram, checked: bool = False) -> str:
    """The source of `program` (DEV.COMPILE): checked first (EXEC.PROGRAM), one statement per UOp. `checked`: every
    memory access checked against its array's size (EXEC.BOUNDS.checked)."""
    check_program(program)
    for i, u in enumerate(program.uops):
      base = u.dtype.base if hasattr(u.dtype, "base") else u.dtype
      if u.op in (Ops.VECTORIZE, Ops.GEP) or u.dtype.count > 1 or base.count > 1:
        raise SpecError("DEV.C.scalar", f"kernel {program.name!r}, UOp #{i} {u.op.name}: the C-style renderers take "
                        f"scalar programs; {u.dtype!r} is a vector")
    k = _Kernel(self, program, checked)
    for u in program.uops: self._uop(k, u)
    return self.render_kernel(k, k.lines)

  def _uop(self, k: _Kernel, u: UOp) -> None:
    op, dt = u.op, u.dtype
    if op is Ops.CONST: k.names[u] = self.render_const(u.arg, dt)
    elif op is Ops.DEFINE_GLOBAL: k.names[u] = f"data{u.arg}"
    elif op is Ops.DEFINE_VAR: k.names[u] = var_name(u)
    elif op is Ops.DEFINE_REG:
      k.names[u] = name = k.fresh("acc")
      k.emit(f"{self.value_type(dt.base)} {name}[{dt.size}];")
    elif op is Ops.DEFINE_LOCAL:
      k.names[u] = name = k.fresh("temp")
      k.locals.append(self.render_local(name, dt.base, dt.size))
    elif op is Ops.SPECIAL: k.names[u] = self.render_special(k, u)
    elif op is Ops.INDEX:
      # DEV.C.memory, EXEC.MEMORY.gate: the address is formed only inside the gate's condition (LOAD and STORE below)
      k.index[u] = (k.names[u.src[0]], k.names[u.src[1]], k.names[u.src[2]] if len(u.src) > 2 else None)
    elif op is Ops.LOAD: self._load(k, u)
    elif op is Ops.STORE: self._store(k, u)
    elif op is Ops.RANGE:   # DEV.C.control
      for r in k.reduce_open.get(u, []):
        k.names[r] = name = k.fresh("red")
        k.emit(f"{self.value_type(r.dtype)} {name} = {self.render_const(reduce_identity(r.arg, r.dtype), r.dtype)};")
      k.names[u] = name = k.fresh("ridx")
      if isinstance(u.arg, tuple) and u.arg[-1] == "unroll" and u.src[0].op is Ops.CONST:   # EXEC.OPT.unroll
        k.emit(self.unroll_pragma.format(n=u.src[0].arg))
      k.emit(f"for ({self.value_type(dt)} {name} = 0; {name} < {k.names[u.src[0]]}; {name}++) {{")
      k.depth += 1
      k.open_ranges.append(u)
    elif op is Ops.END:
      for _ in u.src[1:]:   # check_program made sure they are the innermost open ones; innermost first
        r = k.open_ranges.pop()
        for red in k.reduce_fold.get(r, []):   # EXEC.THREAD.reduce: acc = acc OP v, left to right
          acc = k.names[red]
          k.emit(f"{acc} = {self.alu(k, red.arg, red.dtype, red.dtype, [acc, k.names[red.src[0]]])};")
        k.depth -= 1
        k.emit("}")
    elif op is Ops.IF:
      k.emit(f"if ({k.names[u.src[0]]}) {{")
      k.depth += 1
    elif op is Ops.ENDIF:
      k.depth -= 1
      k.emit("}")
    elif op is Ops.BARRIER: k.emit(self.render_barrier(k, u))
    elif op is Ops.REDUCE: pass   # its accumulator was named at its outermost RANGE
    else:
      src_dt = u.src[1].dtype if op is Ops.WHERE else u.src[0].dtype
      k.names[u] = name = k.fresh("cast" if op in (Ops.CAST, Ops.BITCAST) else "alu")
      args = [k.names[s] for s in u.src]
      k.emit(f"{self.value_type(dt)} {name} = {self.exact_int(u, args) or self.alu(k, op, dt, src_dt, args)};")

  def _element(self, k: _Kernel, idx: UOp, access: UOp) -> tuple[str, str | None, DType, bool]:
    array, i, gate = k.index[idx]
    ptr = idx.dtype
    if k.checked: gate = bounds.check(self, k, idx, access, i, gate)
    return f"{array}[{i}]", gate, ptr.base, ptr.addrspace == "global"

  def _load(self, k: _Kernel, u: UOp) -> None:
    element, gate, dt, is_global = self._element(k, u.src[0], u)
    value = self.render_load(k, dt, element) if is_global else element
    if gate is not None: value = f"{gate} ? {value} : {self.render_const(dtypes.as_const(0, dt), dt)}"
    k.names[u] = name = k.fresh("val")
    k.emit(f"{self.value_type(dt)} {name} = {value};")

  def _store(self, k: _Kernel, u: UOp) -> None:
    element, gate, dt, is_global = self._element(k, u.src[0], u)
    value = k.names[u.src[1]]
    if is_global: value = self.render_store(k, dt, value)
    k.emit(f"{element} = {value};" if gate is None else f"if ({gate}) {element} = {value};")

  # ---- constants
  def render_const(self, v: ConstType, dt: DType) -> str:
    """An exact C literal of value `v` of `dt` (DEV.C.const). 16-bit floats are float32 literals of their value."""
    if dt == dtypes.bool: return "1" if v else "0"
    if dtypes.is_int(dt):
      if dtypes.is_unsigned(dt): return f"{v}{'ull' if dt.itemsize == 8 else 'u' if dt.itemsize == 4 else ''}"
      if v == dtypes.min(dt) and dt.itemsize >= 4:   # -2147483648 would be the negation of an out-of-range literal
        return f"({v + 1}{'ll' if dt.itemsize == 8 else ''} - 1)"
      return f"{v}{'ll' if dt.itemsize == 8 and not -2**31 <= v < 2**31 else ''}"
    suffix = "" if dt == dtypes.float64 else self.float_suffix
    if v != v: return "NAN" if suffix else "(double)NAN"
    if v in (float("inf"), float("-inf")):
      return ("-" if v < 0 else "") + ("INFINITY" if suffix else "(double)INFINITY")
    text = repr(v)
    # the shortest repr rounds back to v in binary64, hence also in any narrower format holding v exactly; long
    # ones read better as hex floats, which are exact by construction
    if len(text) > 12: text = v.hex()
    return f"{text}{suffix}"

  # ---- ALU ops
  def alu(self, k: _Kernel, op: Ops, dt: DType, src: DType, a: list[str]) -> str:
    """The C expression of ALU op `op` (result `dt`, operands of `src`) on operand expressions `a` (OP.*)."""
    if op is Ops.CAST: return self.cast(k, src, dt, a[0])
    if op is Ops.BITCAST: return self.bitcast(k, src, dt, a[0])
    if op in _CMP: return f"({a[0]} {_CMP[op]} {a[1]})"   # DEV.C.compare: C's comparisons are IEEE's (OP.CMPLT.nan)
    if op is Ops.WHERE: return f"({a[0]} ? {a[1]} : {a[2]})"
    if src == dtypes.bool:   # OP.ADD.bool, OP.MUL.bool, OP.MAX.bool: bools are 0/1, so OR, AND, OR
      sym = {Ops.ADD: "|", Ops.MUL: "&", Ops.MAX: "|", **_BITWISE}[op]
      return f"({a[0]} {sym} {a[1]})"
    if dtypes.is_int(src): return self.int_alu(k, op, src, a)
    expr = self.float_alu(k, op, src, a)
    return self.round_half(k, src, expr) if src in HALF_TYPES and op in _ROUNDED else expr

  def exact_int(self, u: UOp, a: list[str]) -> str | None:
    """DEV.C.nowrap: a 32- or 64-bit signed ADD, SUB, MUL or NEG whose operands' bounds (RW.BOUNDS) prove that the
    exact result fits the type, and a CDIV or CMOD by a constant other than 0 and -1, are C's own signed operators: they
    cannot overflow or trap there, so they are defined and give the spec's value, and the compiler sees index
    arithmetic it can reason about (affine addresses, which it needs to vectorise). None for any other op."""
    if u.dtype not in (dtypes.int32, dtypes.int64): return None
    if u.op is Ops.NEG: return f"(-{a[0]})" if u.src[0].vmin > dtypes.min(u.dtype) else None
    if len(u.src) != 2: return None
    x, y = u.src
    if u.op in (Ops.CDIV, Ops.CMOD):
      if y.op is Ops.CONST and y.arg not in (0, -1): return f"({a[0]} {'/' if u.op is Ops.CDIV else '%'} {a[1]})"
      return None
    if u.op not in (Ops.ADD, Ops.SUB, Ops.MUL): return None
    xs, ys = (int(x.vmin), int(x.vmax)), (int(y.vmin), int(y.vmax))
    ends = [p * q for p in xs for q in ys] if u.op is Ops.MUL else \
           [xs[0] + ys[0], xs[1] + ys[1]] if u.op is Ops.ADD else [xs[0] - ys[1], xs[1] - ys[0]]
    if dtypes.min(u.dtype) <= min(ends) and max(ends) <= dtypes.max(u.dtype): return f"({a[0]} {_ARITH[u.op]} {a[1]})"
    return None

  def int_alu(self, k: _Kernel, op: Ops, dt: DType, a: list[str]) -> str:
    """Integer ops (DEV.C.wrap): + - * and NEG in a wide unsigned type, converted back, so they wrap (OP.ADD.wrap)
    without signed overflow; guarded division (DEV.C.cdiv) and shift counts modulo the width (DEV.C.shift)."""
    t, u = self.value_type(dt), self.wide_unsigned(dt)
    native = dt in (dtypes.uint32, dtypes.uint64)   # unsigned int arithmetic wraps as it is
    if op in (Ops.ADD, Ops.SUB, Ops.MUL):
      sym = _ARITH[op]
      return f"({a[0]} {sym} {a[1]})" if native else f"({t})(({u}){a[0]} {sym} ({u}){a[1]})"
    if op is Ops.NEG: return f"({t})(({u})0 - ({u}){a[0]})"   # OP.NEG.wrap: NEG(min) = min
    if op is Ops.MULACC: return f"({t})(({u}){a[0]} * ({u}){a[1]} + ({u}){a[2]})"   # OP.MULACC.wrap
    if op is Ops.MAX: return f"({a[0]} > {a[1]} ? {a[0]} : {a[1]})"
    if op in _BITWISE: return f"({a[0]} {_BITWISE[op]} {a[1]})"
    if op is Ops.SHL: return f"({t})(({u}){a[0]} << ({a[1]} & {dt.bits - 1}))"   # OP.SHL.count, OP.SHL.wrap
    if op is Ops.SHR and dtypes.is_unsigned(dt): return f"({a[0]} >> ({a[1]} & {dt.bits - 1}))"   # OP.SHR.unsigned
    helper = {Ops.CDIV: self._cdiv, Ops.CMOD: self._cmod, Ops.SHR: self._shr, Ops.POW: self._ipow}[op]
    return f"{helper(k, dt)}({a[0]}, {a[1]})"

  def float_alu(self, k: _Kernel, op: Ops, dt: DType, a: list[str]) -> str:
    """Float ops: IEEE operators and libm (DEV.C.libm); 16-bit floats computed in float32 (rounded by the caller)."""
    if op in _ARITH: return f"({a[0]} {_ARITH[op]} {a[1]})"
    one = self.render_const(1.0, dtypes.float64 if dt == dtypes.float64 else dtypes.float32)
    if op is Ops.RECIPROCAL: return f"({one} / {a[0]})"   # OP.RECIPROCAL: exactly FDIV(1, x)
    if op is Ops.NEG: return f"(-{a[0]})"                 # OP.NEG.float: flips the sign bit, also of 0 and NaN
    if op in _LIBM: return f"{self.libm(op, dt)}({', '.join(a)})"
    if op is Ops.MAX: return f"{self._fmax(k, dt)}({a[0]}, {a[1]})"
    if op is Ops.MULACC:   # DEV.C.mulacc, OP.MULACC.fused: C's fma is the exact a*b+c rounded once
      if dt in HALF_TYPES: return f"{self._fma_half(k, dt)}({a[0]}, {a[1]}, {a[2]})"
      return f"fma{'' if dt == dtypes.float64 else self.float_suffix}({a[0]}, {a[1]}, {a[2]})"
    raise SpecError(f"OP.{op.name}", f"{op.name} does not accept {dt!r}")

  def round_half(self, k: _Kernel, dt: DType, x: str) -> str:
    """A float32 expression rounded to the 16-bit float `dt` (DEV.C.half, OP.ROUND)."""
    s = SHORT_NAMES[dt]
    body = self.half_from_bits(k, dt, self.half_to_bits(k, dt, "x"))
    return k.need(f"round_{s}", f"{self.helper_prefix}float round_{s}(float x) {{ return {body}; }}") + f"({x})"

  def cast(self, k: _Kernel, src: DType, dst: DType, x: str) -> str:
    """OP.CAST (DEV.C.cast): every conversion rounds once or saturates as spec/ops.md says."""
    if src == dst: return x
    if dst == dtypes.bool: return f"({x} != 0)"                 # OP.CAST.to-bool: NaN != 0, -0.0 == 0
    if src == dtypes.bool: return f"({self.value_type(dst)}){x}"   # OP.CAST.from-bool: 0 or 1, exact everywhere
    if dtypes.is_int(src) and dtypes.is_int(dst): return f"({self.value_type(dst)}){x}"   # OP.CAST.wrap
    if dtypes.is_float(src) and dtypes.is_int(dst): return f"{self._f2i(k, dst)}({x})"   # OP.CAST.saturate, .nan
    if dst in (dtypes.float32, dtypes.float64):
      # OP.CAST.int-to-float and float-to-float: C's conversions round once; 16-bit values are already float32
      return x if src in HALF_TYPES and dst == dtypes.float32 else f"({self.value_type(dst)}){x}"
    # to a 16-bit float: round once from the exact value (DEV.C.half)
    if src in HALF_TYPES or src == dtypes.float32 or (dtypes.is_int(src) and src.itemsize <= 2):
      return self.round_half(k, dst, f"(float){x}" if dtypes.is_int(src) else x)   # exact in float32
    wide = x if src == dtypes.float64 else f"(double){x}" if src.itemsize <= 4 else f"{self._i2d_odd(k, src)}({x})"
    return self.round_half(k, dst, f"{self._f64_to_f32_odd(k)}({wide})")

  def bitcast(self, k: _Kernel, src: DType, dst: DType, x: str) -> str:
    """OP.BITCAST: same-size reinterpretation; any NaN pattern may come out of a NaN (OP.BITCAST.nan)."""
    if src.itemsize != dst.itemsize:
      raise SpecError("OP.BITCAST.size", f"cannot bitcast {src!r} to {dst!r}: itemsizes differ")
    if src == dst: return x
    if dst == dtypes.bool: return f"({x} != 0)"   # OP.BITCAST.bool: a nonzero byte reads as True
    if src == dtypes.bool or (dtypes.is_int(src) and dtypes.is_int(dst)): return f"({self.value_type(dst)}){x}"
    if src.itemsize == 2:   # 16-bit floats through their bits (OP.BITCAST.bfloat16: bf16 is the upper half of f32)
      bits = self.half_to_bits(k, src, x) if src in HALF_TYPES else f"({self.type_names[dtypes.uint16]}){x}"
      return self.half_from_bits(k, dst, bits) if dst in HALF_TYPES else f"({self.value_type(dst)}){bits}"
    return self.render_bitcast(k, src, dst, x)

  # ---- helper functions, emitted once per kernel that needs them
  def _cdiv(self, k: _Kernel, dt: DType) -> str:
    """OP.CDIV.zero: x/0 = -1 (all bits set); OP.CDIV.overflow: min/-1 = min, computed as a wrapping negation."""
    t, u, s = self.value_type(dt), self.wide_unsigned(dt), SHORT_NAMES[dt]
    body = (f"return b == 0 ? ({t})-1 : a / b;" if dtypes.is_unsigned(dt) else
            f"return b == 0 ? -1 : b == -1 ? ({t})(({u})0 - ({u})a) : ({t})(a / b);")
    return k.need(f"cdiv_{s}", f"{self.helper_prefix}{t} cdiv_{s}({t} a, {t} b) {{ {body} }}")

  def _cmod(self, k: _Kernel, dt: DType) -> str:
    """OP.CMOD.zero: x%0 = x; OP.CMOD.overflow: min%-1 = 0 (C's % would trap on x86)."""
    t, s = self.value_type(dt), SHORT_NAMES[dt]
    body = ("return b == 0 ? a : a % b;" if dtypes.is_unsigned(dt) else
            f"return b == 0 ? a : b == -1 ? 0 : ({t})(a % b);")
    return k.need(f"cmod_{s}", f"{self.helper_prefix}{t} cmod_{s}({t} a, {t} b) {{ {body} }}")

  def _shr(self, k: _Kernel, dt: DType) -> str:
    """OP.SHR.signed: an arithmetic shift written without shifting a negative number (implementation-defined in C):
    for a < 0, a >> c is ~(~a >> c)."""
    t, s = self.value_type(dt), SHORT_NAMES[dt]
    return k.need(f"shr_{s}", f"{self.helper_prefix}{t} shr_{s}({t} a, {t} b) {{ int c = (int)(b & {dt.bits - 1}); "
                  f"return a < 0 ? ({t})~(~a >> c) : ({t})(a >> c); }}")

  def _ipow(self, k: _Kernel, dt: DType) -> str:
    """OP.POW.wrap: exponentiation by squaring in the wide unsigned type; OP.POW.negative-exponent for signed."""
    t, u, s = self.value_type(dt), self.wide_unsigned(dt), SHORT_NAMES[dt]
    neg = ("" if dtypes.is_unsigned(dt) else
           "if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : a == 0 ? -1 : 0; ")
    return k.need(f"pow_{s}", f"{self.helper_prefix}{t} pow_{s}({t} a, {t} b) {{ {neg}{u} r = 1, x = ({u})a; "
                  f"for ({u} e = ({u})b; e; e >>= 1) {{ if (e & 1) r *= x; x *= x; }} return ({t})r; }}")

  def _fmax(self, k: _Kernel, dt: DType) -> str:
    """OP.MAX.nan: NaN if either operand is NaN (C's fmax would drop it); OP.MAX.zero: MAX(-0.0, +0.0) = +0.0."""
    t = "double" if dt == dtypes.float64 else "float"
    name = f"max_{'f64' if dt == dtypes.float64 else 'f32'}"
    return k.need(name, f"{self.helper_prefix}{t} {name}({t} a, {t} b) {{ return a != a || b != b ? a + b : "
                  f"a == b ? (signbit(a) ? b : a) : a > b ? a : b; }}")

  f2i_arg = ("double", "")   # the argument type of the float->int helpers and its literal suffix

  def _f2i(self, k: _Kernel, dt: DType) -> str:
    """OP.CAST.truncate, OP.CAST.saturate, OP.CAST.nan: NaN -> 0, out of range -> the nearest end, else C's
    truncating conversion (defined there). Every float value converts to double exactly; a language without double
    takes float (`f2i_arg`), where the bounds 2^(bits-1) and 2^bits are exact too."""
    t, s = self.value_type(dt), SHORT_NAMES[dt]
    arg, f = self.f2i_arg
    lo, hi = self.render_const(dtypes.min(dt), dt), self.render_const(dtypes.max(dt), dt)
    if dtypes.is_unsigned(dt):
      body = f"return x != x || x <= 0.0{f} ? 0 : x >= 0x1p{dt.bits}{f} ? {hi} : ({t})x;"
    else:
      body = f"return x != x ? 0 : x <= -0x1p{dt.bits - 1}{f} ? {lo} : x >= 0x1p{dt.bits - 1}{f} ? {hi} : ({t})x;"
    return k.need(f"f2i_{s}", f"{self.helper_prefix}{t} f2i_{s}({arg} x) {{ {body} }}")

  def _f64_to_f32_odd(self, k: _Kernel) -> str:
    """double -> float rounded to odd (truncate, then set the last bit if inexact): a later rounding to a format
    of at most 22 bits is then the single correct rounding (DEV.C.half; the same trick as OP.MULACC's reference)."""
    return k.need("f64_to_f32_odd", f"{self.helper_prefix}float f64_to_f32_odd(double d) {{\n"
                  "  float f = (float)d;\n  if (f == d || d != d) return f;\n  uint32_t b; memcpy(&b, &f, 4);\n"
                  "  if (isinf(f) || fabs((double)f) > fabs(d)) b -= 1;   /* one step toward zero: the truncation */\n"
                  "  b |= 1; memcpy(&f, &b, 4); return f;\n}")

  def _i2d_odd(self, k: _Kernel, dt: DType) -> str:
    """A 64-bit integer as a double rounded to odd (exact below 2**53), for one correct rounding to 16 bits."""
    u64 = k.need("u64_to_f64_odd", f"{self.helper_prefix}double u64_to_f64_odd(uint64_t m) {{\n"
                 "  int shift = 0;\n  while ((m >> shift) >= (1ull << 53)) shift++;\n"
                 "  uint64_t kept = (m >> shift) | ((m & ((1ull << shift) - 1)) != 0);\n"
                 "  return ldexp((double)kept, shift);\n}")
    if dtypes.is_unsigned(dt): return u64
    return k.need("i64_to_f64_odd", f"{self.helper_prefix}double i64_to_f64_odd(int64_t v) {{ return v < 0 ? "
                  f"-{u64}(0 - (uint64_t)v) : {u64}((uint64_t)v); }}")

  def _fma_half(self, k: _Kernel, dt: DType) -> str:
    """OP.MULACC.fused for 16-bit floats: a*b is exact in double (at most 22 bits), p + c is made exact with
    TwoSum and rounded to odd, then rounded once to the 16-bit format."""
    add = k.need("f64_add_odd", f"{self.helper_prefix}double f64_add_odd(double p, double c) {{\n"
                 "  double s = p + c, t = s - p, e = (p - (s - t)) + (c - t);   /* s + e == p + c exactly */\n"
                 "  uint64_t b; memcpy(&b, &s, 8);\n"
                 "  if (e != 0 && isfinite(s) && !(b & 1)) s = nextafter(s, e > 0 ? (double)INFINITY : "
                 "-(double)INFINITY);\n"   # (double): OpenCL's overloaded nextafter(double, float) is ambiguous
                 "  return s;\n}")
    s = SHORT_NAMES[dt]
    inner = f"{self._f64_to_f32_odd(k)}({add}((double)a * b, c))"
    return k.need(f"fma_{s}", f"{self.helper_prefix}float fma_{s}(float a, float b, float c) {{ return "
                  f"{self.round_half(k, dt, inner)}; }}")

  def _h_to_f32(self, k: _Kernel, dt: DType) -> str:
    """The exact float32 of 16-bit float bits."""
    if dt == dtypes.bfloat16:
      return k.need("bf16_to_f32", f"{self.helper_prefix}float bf16_to_f32(uint16_t h) {{ uint32_t b = (uint32_t)h "
                    "<< 16; float f; memcpy(&f, &b, 4); return f; }")
    return k.need("f16_to_f32", f"{self.helper_prefix}float f16_to_f32(uint16_t h) {{\n"
                  "  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, b;\n"
                  "  if (e == 0) return sign ? -(float)m * 0x1p-24f : (float)m * 0x1p-24f;   /* zero, subnormal */\n"
                  "  b = sign | (e == 31 ? 0x7f800000u : (e + 112) << 23) | (m << 13);\n"
                  "  float f; memcpy(&f, &b, 4); return f;\n}")

  def _h_from_f32(self, k: _Kernel, dt: DType) -> str:
    """float32 -> 16-bit float bits, rounded to nearest even (DT.ROUND), overflow to inf, NaN kept."""
    if dt == dtypes.bfloat16:
      return k.need("f32_to_bf16", f"{self.helper_prefix}uint16_t f32_to_bf16(float f) {{\n"
                    "  uint32_t x; memcpy(&x, &f, 4);\n"
                    "  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);   /* NaN */\n"
                    "  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);\n}")
    return k.need("f32_to_f16", f"{self.helper_prefix}uint16_t f32_to_f16(float f) {{\n"
                  "  uint32_t x; memcpy(&x, &f, 4);\n"
                  "  uint16_t sign = (uint16_t)((x >> 16) & 0x8000); uint32_t a = x & 0x7fffffffu;\n"
                  "  if (a > 0x7f800000u) return sign | 0x7e00;    /* NaN */\n"
                  "  if (a >= 0x477ff000u) return sign | 0x7c00;   /* |f| >= 65520 rounds to inf */\n"
                  "  if (a >= 0x38800000u) {   /* normal: rebias the exponent, round 13 bits off */\n"
                  "    a -= 0x38000000u;\n    return sign | (uint16_t)((a + 0xfffu + ((a >> 13) & 1)) >> 13);\n  }\n"
                  "  if (a < 0x33000000u) return sign;              /* below 2^-25: rounds to zero */\n"
                  "  uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - (a >> 23);   /* |f|*2^24 = m >> shift */\n"
                  "  uint32_t r = m >> shift, rest = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);\n"
                  "  return sign | (uint16_t)(r + (rest > halfway || (rest == halfway && (r & 1))));\n}")


def reduce_identity(op: Ops, dt: DType) -> ConstType:
  """The start value of a REDUCE (EXEC.THREAD.reduce): 0 for ADD, 1 for MUL, the least value for MAX."""
  if dt == dtypes.bool: return op is Ops.MUL
  return dtypes.as_const({Ops.ADD: 0, Ops.MUL: 1}.get(op, dtypes.min(dt)), dt)


def var_name(u: UOp) -> str:
  """The C name of a DEFINE_VAR: `var_` and its name with anything but letters, digits and `_` replaced."""
  return "var_" + "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in u.arg[0])


# words a kernel may not be named in C, OpenCL C or CUDA C (keywords, qualifiers, built-in type and function names,
# the preambles' macros), and the prefixes of the renderer's helper functions
_RESERVED = frozenset("""auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile
while bool true false half uchar ushort uint ulong size_t kernel global local constant private read_only write_only
read_write class new delete template namespace this operator virtual public protected friend asm main barrier sin exp2
log2 pow sqrt trunc fma nextafter ldexp memcpy isinf isfinite signbit fabs INFINITY NAN""".split())
_HELPER = re.compile(r"(cdiv|cmod|shr|pow|max|f2i|round|fma|bitcast|exp2|f16|bf16|f32|f64|u64|i64)_")


def kernel_name(program: LinearProgram) -> str:
  """The C function name of a program (DEV.C.name): its name with anything but letters, digits and `_` replaced, and
  `k_` in front of a name that starts with a digit, is reserved in one of the C-like languages or could be a helper's
  name."""
  name = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in program.name)
  bad = not name or name[0].isdigit() or name in _RESERVED or name.startswith("_") or _HELPER.match(name)
  return f"k_{name}" if bad else name


class CRenderer(CStyleLanguage):
  """C for the CPU device. The kernel is `void name(buffers..., vars..., int64_t core_start, int64_t core_end[,
  sizes])`; it runs the work-groups `core_start .. core_end - 1` (EXEC.GRID.linear numbering) one after another, each
  thread of a work-group after the other, so disjoint ranges can run on different cores (DEV.C.threads). Work-groups
  of more than one thread are looped over too, which is correct exactly when the program has no BARRIER
  (DEV.CPU.workgroup)."""
  includes = ("math.h", "stdbool.h", "stdint.h", "string.h")

  def _fmax(self, k: _Kernel, dt: DType) -> str:
    """DEV.C.max with the common case first, the same bits as the C-like helper: `a > b` gives a, `b > a` gives b;
    only equal operands (`signbit(a) ? b : a`: +0.0 unless both are -0.0, OP.MAX.zero) and NaN (`a + b`, OP.MAX.nan)
    reach the last line. In a running max the accumulator is usually the larger, so the first test predicts well and
    the two NaN tests leave the loop (a row max over 4096x4096 float32: 41 ms with the NaN tests first)."""
    t = "double" if dt == dtypes.float64 else "float"
    name = f"max_{'f64' if dt == dtypes.float64 else 'f32'}"
    return k.need(name, f"{self.helper_prefix}{t} {name}({t} a, {t} b) {{ if (a > b) return a; if (b > a) return b; "
                  f"return a != a || b != b ? a + b : signbit(a) ? b : a; }}")

  def float_alu(self, k: _Kernel, op: Ops, dt: DType, a: list[str]) -> str:
    """DEV.C.exp2: EXP2 of float32 and of the 16-bit floats (rounded after, DEV.C.half) is the branch-free helper
    `exp2_f32` (refimpl/renderer/exp2.py), which GCC vectorises; glibc's exp2f is a call per element. float64
    keeps libm's exp2 (DEV.C.libm)."""
    if op is Ops.EXP2 and dt != dtypes.float64:
      return k.need("exp2_f32", exp2_f32_source(self.helper_prefix)) + f"({a[0]})"
    return super().float_alu(k, op, dt, a)

  def grid_params(self, program: LinearProgram) -> list[str]:
    """The size parameters after core_start/core_end: `gsize0`, `gsize1` when gidx1 or gidx2 is used (to split the
    work-group id), `lsize<d>` for each lidx<d> used (its loop bound)."""
    used = {u.arg for u in program.uops if u.op is Ops.SPECIAL}
    out = ["gsize0", "gsize1"] if used & {"gidx1", "gidx2"} else []
    return out + [f"lsize{d}" for d in range(3) if f"lidx{d}" in used]

  def render_special(self, k: _Kernel, u: UOp) -> str:
    """SPECIALs are the counters of the loops render_kernel puts around the body."""
    return u.arg

  def render_barrier(self, k: _Kernel, u: UOp) -> str:
    """A comment: threads run one at a time, so a barrier has nothing to wait for when a work-group has one thread;
    launches of larger work-groups with a BARRIER are refused (DEV.CPU.workgroup)."""
    return "/* BARRIER: work-groups of one thread */"

  def bounds_thread_id(self, k: _Kernel, kind: str, d: int) -> str:
    """The loop counter of a SPECIAL the program uses; an unused one is 0 (its launch size is 1, EXEC.GRID.match)."""
    return f"{kind}idx{d}" if f"{kind}idx{d}" in k.specials else "0"

  def render_local(self, name: str, dt: DType, size: int) -> str:
    """A plain array, declared once per work-group (inside the work-group loop, outside the lidx loops)."""
    return f"{self.value_type(dt)} {name}[{size}];"

  def render_kernel(self, k: _Kernel, body: list[str]) -> str:
    """Includes, helpers, then the kernel: the work-group loop, the local arrays, the lidx loops, the body."""
    p = k.p
    params = self.kernel_params(k) + [f"int64_t {n}" for n in ("core_start", "core_end", *self.grid_params(p))]
    sp = k.specials
    loops: list[str] = []
    if {"gidx1", "gidx2"} & set(sp):   # split the linear work-group id (EXEC.GRID.linear)
      loops.append("for (int64_t wg = core_start; wg < core_end; wg++) {")
      split = {"gidx0": "wg % gsize0", "gidx1": "wg / gsize0 % gsize1", "gidx2": "wg / gsize0 / gsize1"}
      loops += [f"  {self.value_type(sp[n].dtype)} {n} = ({self.value_type(sp[n].dtype)})({split[n]});"
                for n in ("gidx0", "gidx1", "gidx2") if n in sp]
    elif "gidx0" in sp:
      t = self.value_type(sp["gidx0"].dtype)
      loops.append(f"for ({t} gidx0 = ({t})core_start; gidx0 < core_end; gidx0++) {{")
    else: loops.append("for (int64_t wg = core_start; wg < core_end; wg++) {")
    depth = 1
    lines = [*(bounds.prologue(self, k) if k.checked else []), *loops, *["  " + d for d in k.locals]]
    for d in range(3):
      if f"lidx{d}" in sp:
        t = self.value_type(sp[f"lidx{d}"].dtype)
        lines.append("  " * depth + f"for ({t} lidx{d} = 0; lidx{d} < lsize{d}; lidx{d}++) {{")
        depth += 1
    lines += ["  " * depth + line for line in body]
    lines += ["  " * d + "}" for d in range(depth - 1, -1, -1)]
    head = "".join(f"#include <{h}>\n" for h in self.includes)
    helpers = "".join(f"{h}\n" for h in k.helpers.values())
    inner = "".join(f"  {line}\n" for line in lines)
    return f"{head}{helpers}\nvoid {kernel_name(p)}({', '.join(params)}) {{\n{inner}}}\n"
