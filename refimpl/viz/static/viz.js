// tinyspec VIZ explorer (spec/backends.md, DEV.VIZ.explorer). Written for this project; no library, nothing fetched
// but the bundles of the server it came from. State lives in the URL fragment, so a view and step can be linked to
// (and a headless browser can open one): #b=BUNDLE&g=GROUP&v=VIEW&s=STEP.
"use strict";
const $ = (id) => document.getElementById(id);
const NODE_W = 156, NODE_H = 46, GAP_X = 18, GAP_Y = 34;
let bundle = null, bundleName = null, zoom = 1;

function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  return { b: p.get("b"), g: +(p.get("g") || 0), v: +(p.get("v") || 0), s: p.has("s") ? +p.get("s") : null };
}
function setHash(st) {
  const p = new URLSearchParams({ b: st.b, g: st.g, v: st.v });
  if (st.s !== null && st.s !== undefined) p.set("s", st.s);
  location.hash = p.toString();
}
const el = (tag, attrs = {}, text = "") => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
};

async function start() {
  const names = await (await fetch("/api/bundles")).json();
  const sel = $("bundle");
  for (const n of names) sel.append(el("option", { value: n }, n));
  sel.onchange = () => setHash({ b: sel.value, g: 0, v: 0, s: null });
  window.onhashchange = render;
  document.onkeydown = onKey;
  for (const [id, f] of [["first", () => 0], ["prev", (s) => s - 1], ["next", (s) => s + 1], ["last", () => 1e9]])
    $(id).onclick = () => step(f);
  $("zoom-in").onclick = () => { zoom *= 1.25; render(); };
  $("zoom-out").onclick = () => { zoom /= 1.25; render(); };
  if (!names.length) { $("title").textContent = "no bundles in this directory"; return; }
  if (!readHash().b) { const st = readHash(); st.b = names[0]; setHash(st); return; }
  render();
}

async function load(name) {
  if (name === bundleName) return;
  bundle = await (await fetch("/api/bundle/" + encodeURIComponent(name))).json();
  bundleName = name;
  $("bundle").value = name;
  $("program").textContent = bundle.program;
  $("notes").replaceChildren(...bundle.notes.map((n) => el("div", {}, n)));
  const nav = $("groups");
  nav.replaceChildren();
  bundle.groups.forEach((g, i) => {
    const a = el("a", { href: "#", class: g.kind, "data-group": i });
    a.append(el("span", { class: "kind" }, g.kind + " "), document.createTextNode(g.name));
    a.onclick = (e) => { e.preventDefault(); setHash({ b: name, g: i, v: 0, s: null }); };
    nav.append(a);
  });
}

function onKey(e) {
  const st = readHash();
  if (e.key === "ArrowRight") step((s) => s + 1);
  else if (e.key === "ArrowLeft") step((s) => s - 1);
  else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    const n = bundle.groups[st.g].views.length;
    setHash({ ...st, v: Math.max(0, Math.min(n - 1, st.v + (e.key === "ArrowDown" ? 1 : -1))), s: null });
  } else return;
  e.preventDefault();
}

function step(f) {
  const st = readHash(), view = bundle.groups[st.g].views[st.v];
  if (view.kind !== "rewrite") return;
  const n = view.rewrite.steps.length;
  setHash({ ...st, s: Math.max(0, Math.min(n, f(st.s === null ? 0 : st.s))) });
}

async function render() {
  const st = readHash();
  if (!st.b) return;
  await load(st.b);
  const g = bundle.groups[Math.min(st.g, bundle.groups.length - 1)];
  if (!g) { $("title").textContent = "this bundle recorded nothing"; return; }
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("sel", +a.dataset.group === st.g);
  $("title").textContent = `${g.kind} ${g.name}`;
  $("info").textContent = Object.entries(g.info).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(", ") : v}`)
    .join("   ");
  const views = $("views");
  views.replaceChildren();
  g.views.forEach((v, i) => {
    const a = el("a", { href: "#", class: i === st.v ? "sel" : "", "data-view": i });
    a.append(el("span", { class: "stage" }, v.stage + " "), document.createTextNode(v.title.replace(v.stage + ": ", "")));
    a.onclick = (e) => { e.preventDefault(); setHash({ ...st, v: i, s: null }); };
    views.append(a);
  });
  const view = g.views[Math.min(st.v, g.views.length - 1)];
  $("stepper").hidden = view.kind !== "rewrite";
  $("text").hidden = view.kind !== "text";
  $("canvas").hidden = $("legend").hidden = view.kind === "text";
  if (view.kind === "text") {
    $("text").textContent = view.text;
    showClause(view.clause, null);
  } else if (view.kind === "graph") {
    draw(view.graph.nodes, view.graph.root, null);
    showClause(view.clause, null);
  } else renderRewrite(view.rewrite, st.s === null ? 0 : Math.min(st.s, view.rewrite.steps.length));
}

function renderRewrite(r, k) {
  const n = r.steps.length;
  $("step-label").textContent = `step ${k} / ${n}`;
  $("step-label").dataset.step = k;
  const root = k === 0 ? r.input : r.steps[k - 1].root;
  const before = k === 0 ? null : (k === 1 ? r.input : r.steps[k - 2].root);
  draw(r.nodes, root, before === null ? null : reachable(r.nodes, before));
  if (k === 0) {
    const what = n ? `input graph of ${r.name}; ${n} rewrites follow` : `${r.name} changed nothing`;
    showClause(null, what + (r.error ? `\n${r.error}` : "") + (r.cut ? `\n(${r.cut} later rewrites were cut)` : ""));
    return;
  }
  const s = r.steps[k - 1], m = r.nodes[s.matched], out = r.nodes[s.result];
  let note = `${s.clause ? "" : s.rule + ": "}#${s.matched} ${m[0]} ${m[2]} -> #${s.result} ${out[0]} ${out[2]}`;
  if (k === n && r.error) note += `\n${r.error}`;
  showClause(s.clause, note);
}

function showClause(id, note) {
  const box = $("clause");
  box.replaceChildren();
  box.dataset.clause = id || "";
  if (id) {
    const c = bundle.clauses[id];
    box.append(el("code", { class: "clause-id" }, id), " ");
    if (c) box.append(el("span", { class: "where" }, `${c.file}:${c.line}`), "\n", el("span", { class: "prose" }, c.text));
    else box.append(el("span", { class: "where" }, "(no prose: spec/ was not beside the package)"));
  }
  if (note) box.append(id ? "\n" : "", el("span", { class: "rule" }, note));
}

// ---- the graph: every node under `root`, sources above their users (longest-path layering from the leaves),
// each layer ordered by the barycentre of its nodes' neighbours (a few sweeps down and up), drawn as SVG
function reachable(nodes, root) {
  const seen = new Set(), order = [], stack = [[root, false]];
  while (stack.length) {
    const [id, done] = stack.pop();
    if (done) { order.push(id); continue; }
    if (seen.has(id)) continue;
    seen.add(id);
    stack.push([id, true]);
    for (const s of nodes[id][3]) if (!seen.has(s)) stack.push([s, false]);
  }
  return order;   // sources before users
}

function layout(nodes, order) {
  // depth: the longest path up from the root, so a node sits just above its deepest user (constants next to the
  // nodes that use them, not all in the top row); the root is the bottom row
  const depth = new Map(), users = new Map(order.map((id) => [id, []]));
  for (const id of order) for (const s of new Set(nodes[id][3])) users.get(s).push(id);
  for (const id of [...order].reverse()) {
    const us = users.get(id);
    depth.set(id, us.length ? 1 + Math.max(...us.map((u) => depth.get(u))) : 0);
  }
  const deepest = Math.max(...depth.values()), layers = [];
  for (const id of order) (layers[deepest - depth.get(id)] ||= []).push(id);
  const pos = new Map();
  const place = () => layers.forEach((ids) => ids.forEach((id, i) => pos.set(id, i - ids.length / 2)));
  place();
  const bary = (ids, nb) => {
    const key = new Map(ids.map((id) => {
      const ns = nb(id);
      return [id, ns.length ? ns.reduce((a, n) => a + pos.get(n), 0) / ns.length : pos.get(id)];
    }));
    ids.sort((a, b) => key.get(a) - key.get(b));
  };
  for (let sweep = 0; sweep < 3; sweep++) {
    for (let l = 1; l < layers.length; l++) { bary(layers[l], (id) => nodes[id][3]); place(); }
    for (let l = layers.length - 2; l >= 0; l--) { bary(layers[l], (id) => users.get(id)); place(); }
  }
  const widest = Math.max(...layers.map((ids) => ids.length));
  const xy = new Map();
  layers.forEach((ids, l) => ids.forEach((id, i) => {
    const x = (i + (widest - ids.length) / 2) * (NODE_W + GAP_X) + GAP_X;
    xy.set(id, [x, l * (NODE_H + GAP_Y) + GAP_Y / 2]);
  }));
  return { xy, width: widest * (NODE_W + GAP_X) + GAP_X, height: layers.length * (NODE_H + GAP_Y) };
}

const SVG = "http://www.w3.org/2000/svg";
const svgEl = (tag, attrs) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};
const cut = (s, n) => (s.length > n ? s.slice(0, n - 1) + "\u2026" : s);

function draw(nodes, root, previous) {
  const order = reachable(nodes, root), { xy, width, height } = layout(nodes, order);
  const old = previous === null ? null : new Set(previous);
  const svg = svgEl("svg", { width: width * zoom, height: height * zoom, viewBox: `0 0 ${width} ${height}`,
                             "data-nodes": order.length });
  for (const id of order) {
    const [x, y] = xy.get(id);
    for (const s of new Set(nodes[id][3])) {
      const [sx, sy] = xy.get(s), x1 = sx + NODE_W / 2, y1 = sy + NODE_H, x2 = x + NODE_W / 2, y2 = y;
      svg.append(svgEl("path", { class: "edge", d: `M${x1},${y1} C${x1},${y1 + GAP_Y} ${x2},${y2 - GAP_Y} ${x2},${y2}` }));
    }
  }
  let changed = 0;
  for (const id of order) {
    const [op, dtype, arg] = nodes[id], [x, y] = xy.get(id);
    const isNew = old !== null && !old.has(id);
    changed += isNew;
    const g = svgEl("g", { class: `node n-${bundle.op_kinds[op] || "other"}${isNew ? " changed" : ""}`, "data-op": op,
                           "data-id": id, transform: `translate(${x},${y})` });
    g.append(svgEl("rect", { width: NODE_W, height: NODE_H, rx: 4 }));
    const lines = [[`#${id} ${op}`, "op"], [cut(dtype, 24), ""], [cut(arg, 24), ""]];
    lines.forEach(([t, cls], i) => { const e = svgEl("text", { x: 5, y: 13 + 13 * i, class: cls }); e.textContent = t; g.append(e); });
    const title = svgEl("title", {});
    title.textContent = `#${id} ${op} ${dtype} ${arg} src=[${nodes[id][3].join(", ")}]`;
    g.append(title);
    svg.append(g);
  }
  svg.dataset.changed = changed;
  $("canvas").replaceChildren(svg);
}

start();
