"""What the OpenCL and CUDA renderers share (spec/backends.md, DEV.GPU.*): the kernel is one work-item's program,
SPECIALs are the language's work-group and work-item ids, DEFINE_LOCAL is work-group memory declared at the top of
the kernel, BARRIER is the language's work-group barrier. The C-style base does every ALU op (DEV.C.*)."""
from __future__ import annotations

from refimpl.dtype import DType
from refimpl.renderer import bounds
from refimpl.renderer.cstyle import CStyleLanguage, _Kernel, kernel_name
from refimpl.uop.ops import UOp

# stdint names for the base's type table; each GPU language spells them with its own built-in types
STDINT = ("int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t")


class GPULanguage(CStyleLanguage):
  """A GPU kernel language: `group_id`/`local_id` spell the built-ins of dimension d, `kernel_prefix` the kernel
  function's qualifiers, `preamble` what goes before the helpers (typedefs, pragmas, macros)."""
  kernel_prefix = ""
  unroll_pragma = "#pragma unroll {n}"   # OpenCL C and CUDA C spelling (EXEC.OPT.unroll)
  barrier = ""
  local_prefix = ""
  preamble = ""

  def group_id(self, d: int) -> str: raise NotImplementedError
  def local_id(self, d: int) -> str: raise NotImplementedError

  def render_special(self, k: _Kernel, u: UOp) -> str:
    """DEV.GPU.special: gidx<d> is the work-group id, lidx<d> the work-item id in its group (EXEC.GRID.backend)."""
    d = int(u.arg[-1])
    k.emit(f"{self.value_type(u.dtype)} {u.arg} = {self.group_id(d) if u.arg[0] == 'g' else self.local_id(d)};")
    return u.arg

  def bounds_thread_id(self, k: _Kernel, kind: str, d: int) -> str:
    """The built-in, valid anywhere in the kernel (a SPECIAL's variable may be declared later or in a block)."""
    return self.group_id(d) if kind == "g" else self.local_id(d)

  def render_barrier(self, k: _Kernel, u: UOp) -> str:
    return self.barrier   # DEV.GPU.barrier

  def render_local(self, name: str, dt: DType, size: int) -> str:
    return f"{self.local_prefix}{self.value_type(dt)} {name}[{size}];"   # DEV.GPU.local

  def render_kernel(self, k: _Kernel, body: list[str]) -> str:
    helpers = "".join(f"{h}\n" for h in k.helpers.values())
    pro = bounds.prologue(self, k) if k.checked else []
    inner = "".join(f"  {line}\n" for line in [*pro, *k.locals, *body])
    params = ", ".join(self.kernel_params(k))
    return f"{self.preamble}{helpers}\n{self.kernel_prefix}void {kernel_name(k.p)}({params})" \
           f" {{\n{inner}}}\n"
