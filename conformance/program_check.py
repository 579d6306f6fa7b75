"""Running random programs (conformance/programs.py) in an implementation and comparing them (CONF.PROGRAM).

- `run_program`: the program's source lines evaluated in the adapter's namespace with its inputs as the adapter's
  tensors, every output realized in one schedule and read back. Where the adapter asks for it (`Adapter.isolation`)
  this happens in a helper process (`Helper`), so that a kernel that kills its process (SIGSEGV, SIGFPE) fails the
  one example, naming the signal, instead of the test run (CONF.PROGRAM.crash).
- `against_reference`: the outputs against the ACC.PROGRAM reference (program_ref.py): bit for bit where it is exact,
  within its bound elsewhere, undetermined elements not compared; and against refimpl on PYTHON, the executable
  spec, bit for bit where the reference is exact.
- `across_devices`: the outputs of two devices of one implementation, bit for bit (CONF.DEVICES).

A failure's message names the clause, the output and the step that made it, the minimal program hypothesis shrank
to, and ends with a reproduction in the implementation's own API that asserts the expected values.
"""
from __future__ import annotations

import copy
import multiprocessing
import pickle
import signal
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.adapters.base import Adapter
from conformance.program_ref import Ref, reference
from conformance.programs import Program
from conformance.properties import _array_source, _literal, adapter_prelude

__all__ = ["ProgramCrash", "Verdict", "run_program", "run", "against_reference", "across_devices", "agree"]


class ProgramCrash(Exception):
  """The implementation failed to run a program: it raised, or its process died (CONF.PROGRAM.crash)."""


@dataclass
class Verdict:
  ok: bool
  message: str = ""
  compared: int = 0       # elements compared
  undetermined: int = 0   # elements ACC.PROGRAM leaves out


# ---------------------------------------------------------------------------------------------------- running

def run_program(adapter: Adapter, program: Program) -> list[tuple[np.ndarray, str]]:
  """The outputs (values, dtype name) of `program` run by `adapter` in this process. A raise names the step."""
  ns: dict[str, Any] = {"__builtins__": __builtins__, **adapter.namespace()}
  for i in program.inputs: ns[i.name] = adapter.tensor(i.values, i.dtype)
  for step, line in zip(program.steps, program.lines()):
    try: exec(compile(line, f"<{step.out}>", "exec"), ns)   # noqa: S102 (the program's own lines)
    except Exception as e:
      raise ProgramCrash(f"step {step.out} ({step.op}) raised {type(e).__name__}: {e}") from e
  exec(program.lines()[-1], ns)   # noqa: S102 (outs = [...])
  outs = ns["outs"]
  try:
    outs[0].realize(*outs[1:])   # one schedule for every output (shared subgraphs, assigns read by several)
    return [(np.asarray(adapter.numpy(o)), adapter.dtype_name(o)) for o in outs]
  except Exception as e:
    raise ProgramCrash(f"realizing {', '.join(program.outputs)} raised {type(e).__name__}: {e}") from e


def _impl_spec(adapter: Adapter) -> str:
  return f"{type(adapter).__module__}:{type(adapter).__qualname__}"


class Helper:
  """A helper process that runs programs with a fresh adapter of implementation `impl` on `backend`; started with
  `method` ('fork' keeps what this process has monkeypatched, 'spawn' starts clean). When it dies, `run` raises
  ProgramCrash naming the signal, and the next call starts a new one."""
  _pool: dict[tuple[str, str, str], Helper] = {}

  def __init__(self, impl: str, backend: str, method: str):
    self.impl, self.backend, self.method, self.proc = impl, backend, method, None

  @classmethod
  def of(cls, impl: str, backend: str, method: str) -> Helper:
    key = (impl, backend, method)
    if key not in cls._pool: cls._pool[key] = Helper(*key)
    return cls._pool[key]

  def run(self, program: Program) -> list[tuple[np.ndarray, str]]:
    """The outputs of `program` run by the helper's adapter."""
    what = f"realizing {', '.join(program.outputs)} (steps: {', '.join(s.op for s in program.steps)})"
    return self._call(("program", program), what)

  def alu(self, op: str, out_dtype: str, operands: list[tuple[np.ndarray, str]]) -> np.ndarray:
    """`Adapter.alu` run by the helper's adapter."""
    return self._call(("alu", (op, out_dtype, operands)), f"running ALU op {op} into {out_dtype}")

  def _call(self, request: tuple, what: str) -> Any:
    if self.proc is None or not self.proc.is_alive():
      ctx = multiprocessing.get_context(self.method)
      self.conn, child = ctx.Pipe()
      self.proc = ctx.Process(target=_serve, args=(child, self.impl, self.backend), daemon=True)
      self.proc.start()
      child.close()
    try:
      self.conn.send_bytes(pickle.dumps(request))
      ok, value = pickle.loads(self.conn.recv_bytes())
    except (EOFError, OSError):
      self.proc.join(timeout=10)
      code, self.proc = self.proc.exitcode, None
      how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
      raise ProgramCrash(f"the process running it on {self.backend} died with {how} while {what}") from None
    if not ok: raise ProgramCrash(value)
    return value


def _serve(conn: Any, impl: str, backend: str) -> None:
  """The helper's loop: receive a pickled request, send back (True, result) or (False, message)."""
  from conformance.adapters.base import load_adapter
  adapter = load_adapter(impl, backend)
  while True:
    try: kind, payload = pickle.loads(conn.recv_bytes())
    except EOFError: return
    try: reply = (True, run_program(adapter, payload) if kind == "program" else adapter.alu(*payload))
    except Exception as e: reply = (False, str(e) if isinstance(e, ProgramCrash) else f"{type(e).__name__}: {e}")
    conn.send_bytes(pickle.dumps(reply))


def run(adapter: Adapter, program: Program, device: str | None = None) -> list[tuple[np.ndarray, str]]:
  """The outputs of `program` on `device` (default: the adapter's backend), in this process or in a helper as
  `Adapter.isolation` says; another device always runs in a helper (with its own adapter)."""
  device = device or adapter.backend
  method = adapter.isolation(device)
  if device == adapter.backend and method is None: return run_program(adapter, program)
  return Helper.of(_impl_spec(adapter), device, method or "fork").run(program)


# ---------------------------------------------------------------------------------------------------- comparing

def agree(got: np.ndarray, want: np.ndarray, bound: np.ndarray) -> np.ndarray:
  """ACC.PROGRAM per element: bit for bit where `bound` is 0 (NaN payloads aside), within it elsewhere, anything
  where it is NaN (undetermined). The reproductions carry a copy of this function (REPRO_CHECK)."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  with np.errstate(invalid="ignore"):
    exact = (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))
    close = exact | (np.abs(got - want) <= bound)
  return np.isnan(bound) | np.where(bound == 0, exact, close)


REPRO_CHECK = '''def agree(got, want, bound):   # ACC.PROGRAM: bit for bit where bound is 0, else within it; NaN: skip
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  exact = (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))
  return np.isnan(bound) | np.where(bound == 0, exact, exact | (np.abs(got - want) <= bound))'''


def _bound(r: Ref) -> np.ndarray:
  """The comparison bound of a Ref: its error bound where determined, NaN where not."""
  return np.where(r.det, r.e, np.nan)


def _describe(got: np.ndarray, want: np.ndarray, bound: np.ndarray, bad: np.ndarray) -> str:
  i = tuple(int(k) for k in np.argwhere(bad)[0])
  b = bound[i]
  how = "bit for bit" if b == 0 else f"bound {b:.3g}"
  return f"{int(bad.sum())} of {bad.size} elements differ; first at {i}: got {got[i]!r}, want {want[i]!r} ({how})"


def _producer(program: Program, name: str) -> str:
  s = program.step_of(name)
  return f"{name} = {s.expr()}" if s else name


def _inputs_source(adapter: Adapter, program: Program) -> list[str]:
  return [f"{i.name} = {adapter.repro_tensor(_array_source(i.values, i.dtype), i.dtype)}" for i in program.inputs]


def _array(a: np.ndarray) -> str:
  a = np.asarray(a, np.float64)
  src = f"np.array({_literal(a)}, dtype=np.float64)"
  return f"{src}.reshape({a.shape!r})" if a.size == 0 and a.ndim > 1 else src


def reproduction(adapter: Adapter, program: Program, wants: list[np.ndarray], bounds: list[np.ndarray]) -> str:
  """Python lines that run the program in the implementation's API and assert the expected outputs."""
  run = [*_inputs_source(adapter, program), *program.lines(), "outs[0].realize(*outs[1:])",
         "got = [o.numpy() for o in outs]"]
  lines = ["import numpy as np", *adapter_prelude(adapter), "try:", *(f"  {line}" for line in run),
           "except Exception as e:   # CONF.PROGRAM.crash: a crash is a failure of the implementation",
           "  raise AssertionError(f'the implementation crashed: {type(e).__name__}: {e}') from e",
           f"want = [{', '.join(_array(w) for w in wants)}]",
           f"bound = [{', '.join(_array(b) for b in bounds)}]   # 0: bit for bit, nan: not compared (ACC.PROGRAM)",
           REPRO_CHECK,
           "for name, g, w, b in zip(" + repr(list(program.outputs)) + ", got, want, bound):",
           "  assert g.shape == w.shape and agree(g, w, b).all(), (name, g, w)"]
  return "\n".join(lines)


def _fail(adapter: Adapter, program: Program, clauses: str, why: str, repro: str) -> Verdict:
  return Verdict(False, f"CONF.PROGRAM [{clauses}]: {why}\n--- program (minimal as hypothesis shrank it) ---\n"
                        f"{program.source()}\n--- reproduction ---\n{repro}")


def against_reference(adapter: Adapter, program: Program, spec: list[tuple[np.ndarray, str]] | None = None) -> Verdict:
  """Run `program` and compare it with its ACC.PROGRAM reference (torch, float64) and, when given, with `spec`, the
  outputs of refimpl on PYTHON (compared bit for bit where the reference is exact)."""
  refs = reference(program)
  outs = [refs[o] for o in program.outputs]
  wants, bounds = [r.v for r in outs], [_bound(r) for r in outs]
  repro = reproduction(adapter, program, wants, bounds)
  try: got = run(adapter, program)
  except ProgramCrash as e:   # a crash is a failure of the implementation, never a skip
    return _fail(adapter, program, "CONF.PROGRAM.crash", f"the implementation crashed: {e}", repro)
  compared = undetermined = 0
  for name, (g, dt), r, w, b in zip(program.outputs, got, outs, wants, bounds):
    where = f"output {_producer(program, name)}"
    if dt != r.dt: return _fail(adapter, program, "ACC.PROGRAM", f"{where} has dtype {dt}, want {r.dt}", repro)
    if g.shape != w.shape: return _fail(adapter, program, "ACC.PROGRAM", f"{where} has shape {g.shape}, want "
                                        f"{w.shape}", repro)
    bad = ~agree(g, w, b)
    if bad.any(): return _fail(adapter, program, "ACC.PROGRAM", f"{where}: {_describe(g, w, b, bad)}", repro)
    compared += int(r.det.sum())
    undetermined += int((~r.det).sum())
  if spec is not None:
    for name, (g, _), (s, _), r in zip(program.outputs, got, spec, outs):
      exact = np.where(r.det & (r.e == 0), 0.0, np.nan)
      bad = ~agree(g, s, exact)
      if bad.any():
        why = f"output {_producer(program, name)} against refimpl on PYTHON: {_describe(g, s, exact, bad)}"
        return _fail(adapter, program, "ACC.PROGRAM, CONF.PROGRAM.spec", why,
                     reproduction(adapter, program, [np.asarray(x, np.float64) for x, _ in spec],
                                  [np.where(rr.det & (rr.e == 0), 0.0, np.nan) for rr in outs]))
  return Verdict(True, compared=compared, undetermined=undetermined)


def across_devices(adapter: Adapter, program: Program, devices: list[str]) -> Verdict:
  """CONF.DEVICES: `program` on every device of `devices`, each output bit for bit the first device's."""
  results = {}
  for d in devices:
    try: results[d] = run(adapter, program, d)
    except ProgramCrash as e:
      return _fail(adapter, program, "CONF.PROGRAM.crash, CONF.DEVICES", f"on {d} the implementation crashed: {e}",
                   _devices_repro(adapter, program, devices))
  first = devices[0]
  for d in devices[1:]:
    for name, (a, da), (b, db) in zip(program.outputs, results[first], results[d]):
      if da != db or a.shape != b.shape:
        return _fail(adapter, program, "CONF.DEVICES", f"output {name}: {first} gives {da}{list(a.shape)}, {d} gives "
                     f"{db}{list(b.shape)}", _devices_repro(adapter, program, devices))
      bad = ~agree(b, a, np.zeros(a.shape))
      if bad.any():
        why = f"output {_producer(program, name)}: {d} against {first}: {_describe(b, a, np.zeros(a.shape), bad)}"
        return _fail(adapter, program, "CONF.DEVICES", why, _devices_repro(adapter, program, devices))
  return Verdict(True)


def _devices_repro(adapter: Adapter, program: Program, devices: list[str]) -> str:
  """The program run on each device in turn, then every output compared bit for bit."""
  lines = ["import numpy as np"]
  for d in devices:
    on = copy.copy(adapter)
    on.backend = d   # only for the prelude's text: which device the lines below run on
    lines += [f"# ---- on {d}", *adapter_prelude(on), *_inputs_source(on, program), *program.lines(),
              "outs[0].realize(*outs[1:])", f"on_{d.replace(':', '_')} = [o.numpy() for o in outs]"]
  first = devices[0].replace(":", "_")
  lines.append(REPRO_CHECK)
  for d in devices[1:]:
    lines += [f"for a, b in zip(on_{first}, on_{d.replace(':', '_')}):   # CONF.DEVICES: bit for bit",
              "  assert a.shape == b.shape and agree(b, a, np.zeros(a.shape)).all(), (a, b)"]
  return "\n".join(lines)
