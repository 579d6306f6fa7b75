"""The layers of DESIGN.md ("Layers and who may import whom"), read from the imports: every import statement of every
module (also inside functions and under `if TYPE_CHECKING`) is parsed, and each rule is one case that names the
module, line and import that break it. Imports by name at run time (the device registry's "module:Factory"
strings, importlib) are not import statements and are not seen. docs/layering.md says how the rules are kept."""
from __future__ import annotations

import ast
import pathlib
import sys
from dataclasses import dataclass
from typing import Callable

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TREES = ("refimpl", "emu", "conformance", "tests", "bench", "examples")

FOUNDATION = ("refimpl.dtype", "refimpl.helpers", "refimpl.device", "refimpl.uop")
LOWER = ("refimpl.engine", "refimpl.codegen", "refimpl.runtime", "refimpl.renderer")
TENSOR_LEVEL = ("refimpl.tensor", "refimpl.nn", "refimpl.jit")
NOT_IN_REFIMPL = ("emu", "conformance", "torch", "hypothesis", "tinygrad")
# and adapters, which subclass conformance.adapters.Adapter: the example one that docs/adapter.md shows
MAY_IMPORT_CONFORMANCE = ("conformance", "tests", "bench", "examples.minimal_adapter")


@dataclass(frozen=True)
class Import:
  module: str        # the importing module, e.g. refimpl.engine.jit
  target: str        # the module imported, e.g. refimpl.tensor (`from a import b` is a.b when that is a module)
  line: int
  typing_only: bool  # under `if TYPE_CHECKING`: for annotations, never run

  def __str__(self) -> str: return f"{self.module}:{self.line} imports {self.target}"


def under(name: str, prefixes: tuple[str, ...]) -> bool:
  """Whether module `name` is one of `prefixes` or inside one of those packages."""
  return any(name == p or name.startswith(p + ".") for p in prefixes)


def module_files(root: pathlib.Path = ROOT) -> dict[str, tuple[str, bool]]:
  """module name -> (source, is a package's __init__) for every .py file of the repository's trees."""
  out = {}
  for tree in TREES:
    for path in sorted((root / tree).rglob("*.py")):
      parts = path.relative_to(root).with_suffix("").parts
      is_pkg = parts[-1] == "__init__"
      out[".".join(parts[:-1] if is_pkg else parts)] = (path.read_text(), is_pkg)
  return out


def _is_type_checking(test: ast.expr) -> bool:
  return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
         (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(module: str, source: str, is_pkg: bool, known: set[str]) -> list[Import]:
  """Every import statement of one module, wherever it is; relative imports resolved against `module`."""
  found: list[Import] = []

  def visit(node: ast.AST, typing_only: bool) -> None:
    if isinstance(node, ast.If) and _is_type_checking(node.test):
      for child in node.body: visit(child, True)
      for child in node.orelse: visit(child, typing_only)
      return
    if isinstance(node, ast.Import):
      found.extend(Import(module, a.name, node.lineno, typing_only) for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        package = module.split(".") if is_pkg else module.split(".")[:-1]
        package = package[:len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
      for a in node.names:
        sub = f"{base}.{a.name}"
        found.append(Import(module, sub if sub in known else base, node.lineno, typing_only))
    for child in ast.iter_child_nodes(node): visit(child, typing_only)
  visit(ast.parse(source, filename=module), False)
  return list(dict.fromkeys(found))   # `from a import b, c` with neither a module: one import of a


def all_imports(files: dict[str, tuple[str, bool]]) -> list[Import]:
  known = set(files)
  return [i for m, (src, is_pkg) in files.items() for i in imports_of(m, src, is_pkg, known)]


def with_module(imports: list[Import], known: set[str], module: str, source: str) -> list[Import]:
  """The imports of the tree with `module` (a new one, or one replaced) made of `source`."""
  return [i for i in imports if i.module != module] + imports_of(module, source, False, known | {module})


# ---- the rules: each returns the imports that break it ----
def lower_layers_below_tensor(imports: list[Import]) -> list[Import]:
  """Engine, codegen, runtime and renderer never import the Tensor, nn or the Tensor-facing jit, nor the root package
  `refimpl` that re-exports them."""
  return [i for i in imports if under(i.module, LOWER) and (under(i.target, TENSOR_LEVEL) or i.target == "refimpl")]


def foundation_imports_foundation(imports: list[Import]) -> list[Import]:
  """refimpl.dtype, refimpl.helpers, refimpl.device and refimpl.uop.* import nothing of refimpl above them."""
  return [i for i in imports if under(i.module, FOUNDATION) and under(i.target, ("refimpl",))
          and not under(i.target, FOUNDATION)]


def refimpl_imports_no_oracles(imports: list[Import]) -> list[Import]:
  """Nothing in refimpl imports emu, conformance, torch, hypothesis or tinygrad."""
  return [i for i in imports if under(i.module, ("refimpl",)) and under(i.target, NOT_IN_REFIMPL)]


def emu_imports_foundation(imports: list[Import]) -> list[Import]:
  """emu imports emu, the foundation of refimpl, numpy and the standard library, nothing else."""
  def allowed(t: str) -> bool:
    top = t.split(".")[0]
    return under(t, ("emu", "numpy") + FOUNDATION) or (top in sys.stdlib_module_names and top != "refimpl")
  return [i for i in imports if under(i.module, ("emu",)) and not allowed(i.target)]


def conformance_imported_by_few(imports: list[Import]) -> list[Import]:
  """Only conformance itself, tests, bench and adapters (examples.minimal_adapter) import conformance."""
  return [i for i in imports if under(i.target, ("conformance",)) and not under(i.module, MAY_IMPORT_CONFORMANCE)]


def foundation_acyclic(imports: list[Import]) -> list[Import]:
  """The run-time imports among the foundation's modules form no cycle (docs/layering.md): for each cycle, the
  import that closes it."""
  graph: dict[str, list[Import]] = {}
  for i in imports:
    if not i.typing_only and under(i.module, FOUNDATION) and under(i.target, FOUNDATION) and i.target != i.module:
      graph.setdefault(i.module, []).append(i)
  closing: list[Import] = []
  state: dict[str, int] = {}   # 1: on the current path, 2: done

  def walk(m: str) -> None:
    state[m] = 1
    for i in graph.get(m, []):
      if state.get(i.target) == 1: closing.append(i)
      elif i.target not in state: walk(i.target)
    state[m] = 2
  for m in sorted(graph):
    if m not in state: walk(m)
  return closing


RULES: list[Callable[[list[Import]], list[Import]]] = [
  lower_layers_below_tensor, foundation_imports_foundation, refimpl_imports_no_oracles, emu_imports_foundation,
  conformance_imported_by_few, foundation_acyclic]


@pytest.fixture(scope="module")
def repo() -> tuple[list[Import], set[str]]:
  files = module_files()
  return all_imports(files), set(files)


@pytest.fixture(scope="module")
def repo_imports(repo) -> list[Import]:
  return repo[0]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_layering(rule, repo_imports):
  bad = rule(repo_imports)
  assert not bad, " ".join(rule.__doc__.split()) + "\n" + "\n".join(f"  {i}" for i in bad)


def test_the_tree_is_read(repo):
  """The checker sees the modules and imports it should, so that the rules above are not vacuous."""
  imports, known = repo
  assert {"refimpl.engine.jit", "refimpl.jit", "refimpl.uop", "refimpl.uop.ops", "emu.device"} <= known
  targets = {(i.module, i.target) for i in imports}
  assert ("refimpl.jit", "refimpl.tensor") in targets and ("refimpl.engine.jit", "refimpl.engine.realize") in targets
  assert ("refimpl.uop.bounds", "refimpl.uop.ops") in targets   # a TYPE_CHECKING import is still an import


# ---- each rule catches a planted bad import, named by module and import ----
PLANTED = [
  (lower_layers_below_tensor, "refimpl.engine.bad", "def f():\n  from refimpl.tensor import Tensor\n",
   "refimpl.tensor"),
  (lower_layers_below_tensor, "refimpl.codegen.bad", "from refimpl import Tensor\n", "refimpl"),
  (lower_layers_below_tensor, "refimpl.renderer.bad", "from ..jit import TinyJit\n", "refimpl.jit"),
  (foundation_imports_foundation, "refimpl.uop.bad", "from refimpl.engine.realize import buffers\n",
   "refimpl.engine.realize"),
  (foundation_imports_foundation, "refimpl.dtype", "class C:\n  def m(self):\n    import refimpl.nn\n", "refimpl.nn"),
  (refimpl_imports_no_oracles, "refimpl.nn.bad", "try:\n  import torch\nexcept ImportError: pass\n", "torch"),
  (refimpl_imports_no_oracles, "refimpl.engine.bad", "from emu.device import PythonBackend\n", "emu.device"),
  (emu_imports_foundation, "emu.bad", "import refimpl.tensor\n", "refimpl.tensor"),
  (emu_imports_foundation, "emu.bad", "from typing import TYPE_CHECKING\nif TYPE_CHECKING: import torch\n", "torch"),
  (conformance_imported_by_few, "emu.bad", "from conformance.strategies import shapes\n", "conformance.strategies"),
  (conformance_imported_by_few, "refimpl.bad", "import conformance\n", "conformance"),
]


@pytest.mark.parametrize("rule,module,source,target", PLANTED, ids=[f"{r.__name__}-{m}-{t}" for r, m, _, t in PLANTED])
def test_planted_bad_import_is_named(rule, module, source, target, repo):
  bad = rule(with_module(*repo, module, source))
  assert [(i.module, i.target) for i in bad] == [(module, target)], [str(i) for i in bad]
  assert str(bad[0]).startswith(f"{module}:") and target in str(bad[0])


def test_planted_cycle_is_named(repo):
  """A module-level import of the package from inside it (the package imports its modules) closes a cycle."""
  source = (ROOT / "refimpl/uop/shapes.py").read_text() + "\nfrom refimpl.uop import UOp\n"
  bad = foundation_acyclic(with_module(*repo, "refimpl.uop.shapes", source))
  assert bad and all(under(i.module, ("refimpl.uop",)) and under(i.target, ("refimpl.uop",)) for i in bad), bad
  assert "refimpl.uop.shapes" in {i.module for i in bad} | {i.target for i in bad}


def test_typing_only_imports_make_no_cycle():
  """An import for annotations alone does not run, so it closes no cycle; one inside a function does."""
  typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING: from refimpl.uop.a import g\n"
  files = {"refimpl.uop.a": ("from refimpl.uop.b import f\n", False), "refimpl.uop.b": (typing_only, False)}
  assert foundation_acyclic(all_imports(files)) == []
  files["refimpl.uop.b"] = ("def h():\n  from refimpl.uop.a import g\n", False)
  assert [str(i) for i in foundation_acyclic(all_imports(files))] in (["refimpl.uop.b:2 imports refimpl.uop.a"],
                                                                     ["refimpl.uop.a:1 imports refimpl.uop.b"])


def test_tensor_modules_stay_short():
  """DESIGN.md: the Tensor is written by op family, each module a few hundred lines; none may pass 600 (issue 15)."""
  long = {p.name: n for p in sorted((ROOT / "refimpl" / "tensor").glob("*.py"))
          if (n := len(p.read_text().splitlines())) > 600}
  assert not long, f"refimpl/tensor modules over 600 lines: {long} (split the family)"
