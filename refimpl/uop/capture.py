"""VIZ capture (spec/backends.md, DEV.VIZ): what the compiler rewrote, step by step, with the clause of each step.

While a `Recorder` is installed (`start()`; VIZ=1 installs one when refimpl is imported, refimpl/viz), every
`graph_rewrite` records its input graph, each rule application (the rule's clause ID, the node it matched, the
replacement) and its output (DEV.VIZ.capture). Records are grouped by what was being compiled: the pipeline opens a
group for each schedule (engine/schedule.py) and each kernel (engine/realize.py); a rewrite outside any group goes to
the group "other rewrites" when it changed something.

A record keeps, for each step, the root of the whole graph as it stands after that step. UOps are hash-consed, so a
graph is its root: the graph after step k is the input graph with every node matched in steps 1..k replaced by its
replacement and the nodes above them rebuilt (`Replay`). The last step's graph is the rewrite's output
(DEV.VIZ.replay). Nodes are written once per record into a table of [op, dtype, arg, source ids].

Cost: with no recorder, `graph_rewrite` checks the module-level `recorder` once per call and does nothing else
(DEV.VIZ.off). With one, the capture is bounded (DEV.VIZ.cap): at most `max_steps` rule applications are kept per
rewrite and at most `max_bytes` of records per recorder; what is cut is counted and the bundle says so."""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

MAX_STEPS = 500            # rule applications kept per graph_rewrite (DEV.VIZ.cap)
MAX_BYTES = 64 * 2 ** 20   # serialized records kept per recorder (DEV.VIZ.cap)
ARG_CHARS = 80             # an arg is shown as its repr, cut to this many characters

recorder: Recorder | None = None   # the installed recorder; None: VIZ is off (DEV.VIZ.off)


@dataclass
class Group:
  """What one compilation recorded: kind ("schedule", "kernel", "other"), a name, facts (`info`), named graphs and
  texts, and the records of its graph_rewrites in the order they ran."""
  kind: str
  name: str
  info: dict[str, Any] = field(default_factory=dict)
  graphs: dict[str, dict] = field(default_factory=dict)
  texts: dict[str, str] = field(default_factory=dict)
  rewrites: list[dict] = field(default_factory=list)
  owner: Recorder | None = field(default=None, repr=False)

  def snapshot(self, label: str, root) -> None:
    """Keep the graph under `root` as it is now, under `label` (DEV.VIZ.cap: not once the recorder is full)."""
    if self.owner is not None and self.owner.full(): return
    table = NodeTable()
    self.graphs[label] = {"nodes": table.rows, "root": table.add(root)}
    if self.owner is not None: self.owner.bytes += len(json.dumps(self.graphs[label]))

  def to_json(self) -> dict:
    return {"kind": self.kind, "name": self.name, "info": self.info, "graphs": self.graphs, "texts": self.texts,
            "rewrites": self.rewrites}


class NodeTable:
  """The nodes of one record, numbered as first seen: each row is [op, dtype, arg, [source ids]]."""
  def __init__(self):
    self.ids: dict[Any, int] = {}
    self.rows: list[list] = []

  def add(self, root) -> int:
    """The id of `root`, adding it and every node under it not yet in the table (iterative: graphs can be deep)."""
    stack = [root]
    while stack:
      u = stack[-1]
      if u in self.ids: stack.pop(); continue
      missing = [s for s in u.src if s not in self.ids]
      if missing: stack.extend(missing); continue
      arg = "" if u.arg is None else repr(u.arg)
      if len(arg) > ARG_CHARS: arg = arg[:ARG_CHARS - 3] + "..."
      self.ids[u] = len(self.rows)
      self.rows.append([u.op.name, repr(u.dtype).removeprefix("dtypes."), arg, [self.ids[s] for s in u.src]])
      stack.pop()
    return self.ids[root]


class Replay:
  """The graph under `root` after each step (DEV.VIZ.replay): every node matched so far replaced by its replacement,
  the replacement itself replayed the same way, and the nodes above a replacement rebuilt on their new sources
  (graph_rewrite's own order, RW.ENGINE). Each node's replayed form is kept between steps, and a step forgets only
  the forms that looked at the node it matched, so a step costs the nodes above that node, not the whole graph.
  Depth-first with an explicit stack (graphs can be deep); a chain that runs back into a node still being replayed
  (only after a rewrite loop, RW.ENGINE.loop) is cut there."""
  def __init__(self, root):
    self.root = root
    self.replaced: dict[Any, Any] = {}
    self.memo: dict[Any, Any] = {}
    self.users: dict[Any, list] = {}   # node -> nodes whose replayed form was computed by looking at it

  def step(self, matched, result) -> Any:
    """The root after `matched` became `result`."""
    self.replaced[matched] = result
    stale = [matched]
    while stale:
      x = stale.pop()
      self.memo.pop(x, None)
      stale.extend(self.users.pop(x, ()))
    return self.replay()

  def _done(self, u, final, looked_at) -> None:
    self.memo[u] = final
    for d in looked_at: self.users.setdefault(d, []).append(u)

  def replay(self) -> Any:
    memo, replaced = self.memo, self.replaced
    grey: set = set()   # nodes whose dependencies are being replayed
    stack = [self.root]
    while stack:
      u = stack[-1]
      if u in memo: stack.pop(); continue
      if u not in grey:
        grey.add(u)
        deps = [replaced[u]] if u in replaced else list(u.src)
        for d in deps:
          if d in grey and d not in memo: memo[d] = d   # a cycle: cut it
        stack.extend(d for d in deps if d not in memo)
        continue
      if u in replaced: self._done(u, memo[replaced[u]], (replaced[u],))
      else:
        src = tuple(memo[s] for s in u.src)
        new = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
        if new is not u and new in replaced and new not in memo and new not in grey:
          stack.append(new)   # the rebuilt node is one a rule rewrote: replay that first, then come back
          continue
        self._done(u, memo.get(new, new), u.src + ((new,) if new is not u else ()))
      grey.discard(u)
      stack.pop()
    return memo[self.root]


class RewriteRecord:
  """One graph_rewrite as it runs: its input, and each rule application (matched node, replacement, rule)."""
  def __init__(self, owner: Recorder, sink, name: str | None, top_down: bool):
    self.owner, self.sink, self.name, self.top_down = owner, sink, name, top_down
    self.steps: list[tuple[Any, Any, Any]] = []
    self.dropped = 0

  def wrap(self, rewrite_with_rule: Callable) -> Callable:
    """`rewrite_with_rule` that also records each hit (the PatternMatcher method graph_rewrite calls per node)."""
    def rewrite(node, ctx):
      hit = rewrite_with_rule(node, ctx)
      if hit is not None:
        if len(self.steps) < self.owner.max_steps: self.steps.append((node, hit[0], hit[1]))
        else: self.dropped += 1   # DEV.VIZ.cap: counted, not kept
      return hit
    return rewrite

  def finish(self, out, error: BaseException | None = None) -> None:
    """Replay the steps into whole graphs, write the record into the current group (DEV.VIZ.replay)."""
    table, replay = NodeTable(), Replay(self.sink)
    steps = []
    for matched, result, rule in self.steps:
      root = replay.step(matched, result)
      steps.append({"clause": rule.clause, "rule": rule.label, "matched": table.add(matched),
                    "result": table.add(result), "root": table.add(root)})
    record = {"name": self.name or "graph_rewrite", "top_down": self.top_down, "input": table.add(self.sink),
              "output": None if out is None else table.add(out), "steps": steps, "cut": self.dropped,
              "error": None if error is None else f"{type(error).__name__}: {error}", "nodes": table.rows}
    self.owner.keep(record)


class Recorder:
  """The groups recorded so far, the group being recorded into, and the caps (DEV.VIZ.cap)."""
  def __init__(self, max_steps: int = MAX_STEPS, max_bytes: int = MAX_BYTES):
    self.max_steps, self.max_bytes = max_steps, max_bytes
    self.groups: list[Group] = []
    self.current: Group | None = None
    self.other: Group | None = None
    self.bytes = 0
    self.cut = 0          # rewrites, graphs and groups not kept because max_bytes was reached
    self.seen: set = set()   # kernels recorded: each compiled kernel is recorded once per recorder

  @contextlib.contextmanager
  def group(self, kind: str, name: str, **info) -> Iterator[Group]:
    """Record into a new group for the length of the block."""
    g, previous = Group(kind, name, dict(info), owner=self), self.current
    if not self.full(): self.groups.append(g)   # DEV.VIZ.cap: a group after the cap is recorded into, then dropped
    self.current = g
    try: yield g
    finally: self.current = previous

  def first_time(self, key) -> bool:
    """Whether the kernel of `key` is not recorded yet (and from now on it is)."""
    if key in self.seen: return False
    self.seen.add(key)
    return True

  def full(self) -> bool:
    """Whether max_bytes of records are kept: then what comes is counted in `cut`, not kept (DEV.VIZ.cap)."""
    if self.bytes < self.max_bytes: return False
    self.cut += 1
    return True

  def begin(self, sink, name: str | None, top_down: bool) -> RewriteRecord | None:
    """A record for a graph_rewrite starting now, or None once max_bytes is reached."""
    if self.full(): return None
    return RewriteRecord(self, sink, name, top_down)

  def keep(self, record: dict) -> None:
    target = self.current
    if target is None:
      if not record["steps"]: return   # a rewrite outside any compilation that changed nothing: not worth a line
      if self.other is None:
        self.other = Group("other", "other rewrites")
        self.groups.append(self.other)
      target = self.other
    self.bytes += len(json.dumps(record))
    target.rewrites.append(record)

  def to_json(self) -> dict:
    return {"groups": [g.to_json() for g in self.groups], "cut_rewrites": self.cut, "bytes": self.bytes,
            "max_steps": self.max_steps, "max_bytes": self.max_bytes}


def start(max_steps: int = MAX_STEPS, max_bytes: int = MAX_BYTES) -> Recorder:
  """Install a new recorder (replacing any) and return it."""
  global recorder
  recorder = Recorder(max_steps, max_bytes)
  return recorder


def stop() -> Recorder | None:
  """Uninstall the recorder and return it (None if there was none)."""
  global recorder
  rec, recorder = recorder, None
  return rec
