"""refimpl has tinygrad 0.14.0's whole public API (spec/api.md, API.SCOPE): every public name of its Tensor, of the
package and of nn, nn.optim and nn.state, with every named parameter and plain default, unless spec/api.md lists it
(API.EXCLUDED, API.DIFF). tinygrad is read, never run: importing it and inspecting signatures needs no compiler."""
from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from conformance.spec_tables import tables

tinygrad = pytest.importorskip("tinygrad", reason="API.SCOPE: the `tinygrad` extra (tinygrad==0.14.0) is not installed")

import refimpl  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
API_SPEC = ROOT / "spec" / "api.md"


def _table(clause: str) -> list[tuple[str, ...]]:
  rows = [r for c, _, body in tables(API_SPEC) if c == clause for r in body]
  return [tuple(cell.strip("`") for cell in r) for r in rows]


EXCLUDED = {r[0]: r[1] for r in _table("API.EXCLUDED")}
DIFFS = {(r[0], r[1]): r[2] for r in _table("API.DIFF")}


def _module(name: str):
  mod = tinygrad
  for part in name.split(".")[1:]: mod = getattr(mod, part)
  return mod


def _ours(qualified: str):
  """refimpl's object for a tinygrad qualified name (`Tensor.pad`, `tinygrad.nn.optim.Muon`), or None."""
  if qualified.startswith("Tensor."): return getattr(refimpl.Tensor, qualified.split(".", 1)[1], None)
  modname, _, attr = qualified.rpartition(".")
  try: mod = importlib.import_module(modname.replace("tinygrad", "refimpl", 1))
  except ImportError: return None
  return getattr(mod, attr, None)


def _public_names() -> list[str]:
  """Every name API.SCOPE counts, qualified: Tensor.<name>, tinygrad.<name>, tinygrad.nn.<name>, ..."""
  names = [f"Tensor.{n}" for n in dir(tinygrad.Tensor) if not n.startswith("_")]
  names += [f"tinygrad.{n}" for n in dir(tinygrad) if not n.startswith("_") and
            not inspect.ismodule(getattr(tinygrad, n))]
  for modname in ("tinygrad.nn", "tinygrad.nn.optim", "tinygrad.nn.state"):
    mod = _module(modname)
    names += [f"{modname}.{n}" for n in dir(mod) if not n.startswith("_") and
              (inspect.isclass(getattr(mod, n)) or inspect.isfunction(getattr(mod, n))) and
              getattr(getattr(mod, n), "__module__", None) == modname]
  return sorted(names)


def _theirs(qualified: str):
  if qualified.startswith("Tensor."): return inspect.getattr_static(tinygrad.Tensor, qualified.split(".", 1)[1])
  modname, _, attr = qualified.rpartition(".")
  return getattr(_module(modname), attr)


def _signature(obj) -> inspect.Signature | None:
  if isinstance(obj, (staticmethod, classmethod)): obj = obj.__func__
  if isinstance(obj, property) or not callable(obj): return None
  try: return inspect.signature(obj)
  except (TypeError, ValueError): return None


_PLAIN = (int, float, str, bool, type(None))


def _plain(v) -> bool:
  return isinstance(v, _PLAIN) or (isinstance(v, tuple) and all(_plain(x) for x in v))


NAMES = _public_names()


def test_scope_is_tinygrad_0_14():
  """The enumeration reads the version the spec names, and finds about what it should (251 Tensor names)."""
  from importlib.metadata import version
  assert version("tinygrad") == "0.14.0"
  assert sum(n.startswith("Tensor.") for n in NAMES) == 251


def test_exclusions_name_tinygrad_names():
  """Every excluded name exists in tinygrad, and refimpl does not have it after all (a stale line is an error)."""
  stale = [n for n in EXCLUDED if n not in NAMES]
  assert not stale, f"API.EXCLUDED lists names tinygrad 0.14.0 does not have: {stale}"
  present = [n for n in EXCLUDED if _ours(n) is not None]
  assert not present, f"API.EXCLUDED lists names refimpl has: {present}"


@pytest.mark.parametrize("name", NAMES)
def test_name_and_parameters(name):
  """API.SCOPE: the name exists in refimpl, with each named parameter of tinygrad's signature and its plain default
  (or a row of API.DIFF saying why not)."""
  if name in EXCLUDED: pytest.skip(f"API.EXCLUDED: {EXCLUDED[name]}")
  ours = _ours(name)
  assert ours is not None, f"refimpl lacks {name} (API.SCOPE); add it, or a row to API.EXCLUDED in spec/api.md"
  theirs, mine = _signature(_theirs(name)), _signature(inspect.getattr_static(refimpl.Tensor, name[7:])
                                                        if name.startswith("Tensor.") else ours)
  if theirs is None: return
  assert mine is not None, f"{name} is callable in tinygrad but not in refimpl"
  ours_params = mine.parameters
  problems = []
  for pname, p in theirs.parameters.items():
    if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or pname in ("self", "cls") or (name, pname) in DIFFS: continue
    if pname not in ours_params:   # a **kwargs catch-all does not count: it would take the argument and ignore it
      problems.append(f"lacks parameter {pname!r}")
      continue
    q = ours_params[pname]
    if p.default is not p.empty and _plain(p.default) and q.default != p.default:
      problems.append(f"default of {pname!r} is {q.default!r}, tinygrad's {p.default!r}")
  assert not problems, f"{name}: " + "; ".join(problems) + " (API.SCOPE; or a row of API.DIFF)"
