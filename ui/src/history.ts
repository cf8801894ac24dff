import { call, get, post, q, Sandbox, Snapshot, Lineage, LNode, Diff } from "./api";
import { h, s, clear, button, status } from "./dom";

// The history page: the turn timeline, a diff between two points, and the
// family's lineage drawn as an SVG graph with rollback, fork and promote.
export async function historyPage(app: HTMLElement, id: string): Promise<() => void> {
  const enc = encodeURIComponent(id);
  const [, lin] = await Promise.all([get<Sandbox>(`/sandboxes/${enc}`), get<Lineage>(`/sandboxes/${enc}/lineage`)]);
  const snaps = await allSnapshots(id).catch(() => [] as Snapshot[]);
  const mine = snaps.filter((x) => x.sandboxID === id).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  const [calls, cmds] = await Promise.all([
    get<ToolCall[]>(`/sandboxes/${enc}/tools/calls${q({ limit: 1000 })}`).catch(() => [] as ToolCall[]),
    commandsRun(enc)]);
  const diffBox = h("section", { "aria-labelledby": "h-diff", id: "diff" }, h("h2", { id: "h-diff" }, "Diff"));
  const from = pointSelect("diff-from", mine, mine.at(-2)?.snapshotID);
  const to = pointSelect("diff-to", mine, "live");
  const actions = h("div", { id: "node-actions", class: "card", "aria-live": "polite" }, "Select a node of the tree.");
  app.append(
    h("h1", {}, `History of ${id}`),
    h("p", {}, h("a", { href: `#/sandbox/${enc}` }, "Back to the sandbox")),
    h("section", { "aria-labelledby": "h-turns" }, h("h2", { id: "h-turns" }, "Turns"), timeline(mine, byTurn(mine, calls), byTurn(mine, cmds))),
    h("form", { class: "filters", onsubmit: (e: Event) => { e.preventDefault(); showDiff(diffBox, from.value, to.value, enc); } },
      h("label", { for: "diff-from" }, "From"), from, h("label", { for: "diff-to" }, "To"), to, h("button", { type: "submit", id: "diff-go" }, "Show diff")),
    diffBox,
    h("section", { "aria-labelledby": "h-tree" }, h("h2", { id: "h-tree" }, "Lineage"), tree(lin, id, (n) => nodeActions(actions, n, enc)), actions));
  return () => {};
}

// allSnapshots reads the sandbox's snapshots a page of 500 at a time (the
// API's paging), so a long history is whole rather than cut at one page.
async function allSnapshots(id: string): Promise<Snapshot[]> {
  const out: Snapshot[] = [];
  let token = "";
  do {
    const res = await call("GET", `/snapshots${q({ sandboxID: id, limit: 500, nextToken: token })}`);
    out.push(...((await res.json()) as Snapshot[]));
    token = res.headers.get("X-Next-Token") ?? "";
  } while (token && out.length < 100_000);
  return out;
}

interface ToolCall { tool: string; at: string; isError: boolean; snapshotID?: string; }
interface Command { cmd: string; at: string; snapshotID?: string; }
interface LogEntry { timestamp: string; message: string; fields?: Record<string, string>; }

const STARTED = "started: ";

// commandsRun reads the commands run in the sandbox from its log, where the
// daemon writes a "started: ARGV" entry (with the process's pid) for every
// command and process it runs; one call, paged by the log's own limit.
async function commandsRun(enc: string): Promise<Command[]> {
  try {
    const page = await get<{ logEntries: LogEntry[] }>(`/sandboxes/${enc}/logs${q({ search: STARTED, limit: 10000 })}`);
    return page.logEntries.filter((e) => e.fields?.pid && e.message.startsWith(STARTED))
      .map((e) => ({ cmd: e.message.slice(STARTED.length), at: e.timestamp }));
  } catch { return []; }
}

// byTurn gives each snapshot the tool calls (or commands) made since the
// one before it (a call that took the turn itself names it).
function byTurn<T extends { at: string; snapshotID?: string }>(snaps: Snapshot[], calls: T[]): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const c of calls) {
    const s = c.snapshotID ? snaps.find((x) => x.snapshotID === c.snapshotID) : snaps.find((x) => Date.parse(x.createdAt) >= Date.parse(c.at));
    if (!s) continue;
    out.set(s.snapshotID, [...(out.get(s.snapshotID) ?? []), c]);
  }
  return out;
}

function pointSelect(idAttr: string, snaps: Snapshot[], selected?: string): HTMLSelectElement {
  const opts = [...snaps.map((x) => ({ v: x.snapshotID, l: label(x) })), { v: "live", l: "live" }];
  const sel = h("select", { id: idAttr }, opts.map((o) => h("option", { value: o.v, selected: o.v === selected }, o.l))) as HTMLSelectElement;
  return sel;
}

function label(x: Snapshot): string {
  return x.kind === "turn" ? `turn ${x.turn}` : x.name || `${x.kind} ${x.snapshotID.slice(0, 12)}`;
}

// timeline lists one mark per snapshot; only the visible rows are drawn
// (a fixed row height and a scroll window), so 1,000 turns stay smooth.
function timeline(snaps: Snapshot[], calls: Map<string, ToolCall[]>, cmds: Map<string, Command[]>): HTMLElement {
  const ROW = 28, VISIBLE = 12;
  const inner = h("ol", { class: "timeline-inner", style: undefined });
  const box = h("div", { class: "timeline", id: "timeline", tabindex: 0, "aria-label": "Turn timeline" }, inner);
  box.style.height = `${Math.min(snaps.length, VISIBLE) * ROW + 4}px`;
  inner.style.height = `${snaps.length * ROW}px`;
  const draw = () => {
    const first = Math.floor(box.scrollTop / ROW);
    clear(inner, snaps.slice(first, first + VISIBLE + 2).map((x, i) => {
      const tools = (calls.get(x.snapshotID) ?? []).map((c) => c.tool + (c.isError ? " (error)" : ""));
      const run = (cmds.get(x.snapshotID) ?? []).map((c) => c.cmd);
      const li = h("li", { "data-snapshot": x.snapshotID, title: run.join("\n") }, h("span", { class: "mark", "aria-hidden": "true" }, "●"),
        ` ${label(x)} · ${new Date(x.createdAt).toISOString()}`, tools.length ? ` · tools: ${tools.join(", ")}` : "",
        run.length ? ` · commands: ${run.map((c) => (c.length > 60 ? c.slice(0, 59) + "…" : c)).join("; ")}` : "");
      li.style.top = `${(first + i) * ROW}px`;
      return li;
    }));
  };
  box.addEventListener("scroll", draw);
  draw();
  return box;
}

async function showDiff(box: HTMLElement, from: string, to: string, enc: string) {
  try {
    const d = await get<Diff>(`/snapshots/${encodeURIComponent(from)}/diff${q({ to, content: "true" })}`);
    clear(box, h("h2", { id: "h-diff" }, "Diff"),
      h("ul", {}, d.changes.map((c) => h("li", {}, `${c.change} ${c.path}`))),
      d.changes.filter((c) => c.diff).map((c) => sideBySide(c.path, c.diff!)));
  } catch (err) { status((err as Error).message, true); }
}

// sideBySide turns a unified diff into two columns: old on the left, new on the right.
function sideBySide(path: string, unified: string): HTMLElement {
  const rows: [string, string, string][] = [];
  let dels: string[] = [], adds: string[] = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) rows.push([dels[i] ?? "", adds[i] ?? "", "chg"]);
    dels = []; adds = [];
  };
  for (const line of unified.split("\n")) {
    if (line.startsWith("---") || line.startsWith("+++")) continue;
    if (line.startsWith("@@")) { flush(); rows.push([line, line, "hunk"]); }
    else if (line.startsWith("-")) dels.push(line.slice(1));
    else if (line.startsWith("+")) adds.push(line.slice(1));
    else { flush(); rows.push([line.slice(1), line.slice(1), ""]); }
  }
  flush();
  return h("table", { class: "diff", "data-path": path },
    h("caption", {}, path),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Before"), h("th", { scope: "col" }, "After"))),
    h("tbody", {}, rows.map(([a, b, cls]) => h("tr", { class: cls }, h("td", { class: cls === "chg" && a ? "del" : "" }, a), h("td", { class: cls === "chg" && b ? "add" : "" }, b)))));
}

// tree lays the family out with one lane per sandbox and one row per node
// in creation order; edges are straight lines.
function tree(lin: Lineage, current: string, select: (n: LNode) => void): SVGElement {
  const owner = new Map<string, string>();
  for (const e of lin.edges) if (e.kind === "snapshot-of") owner.set(e.from, e.to);
  const nodes = lin.nodes.filter((n) => n.type !== "template")
    .sort((a, b) => (a.createdAt ?? "").localeCompare(b.createdAt ?? ""));
  const lanes = new Map<string, number>();
  for (const n of nodes) {
    const lane = n.type === "sandbox" ? n.id : owner.get(n.id) ?? n.id;
    if (!lanes.has(lane)) lanes.set(lane, lanes.size);
  }
  const pos = new Map<string, [number, number]>();
  nodes.forEach((n, i) => pos.set(n.id, [40 + 160 * lanes.get(n.type === "sandbox" ? n.id : owner.get(n.id) ?? n.id)!, 30 + 44 * i]));
  const width = 80 + 160 * Math.max(1, lanes.size), height = 60 + 44 * nodes.length;
  const svg = s("svg", { id: "tree", width, height, viewBox: `0 0 ${width} ${height}`, role: "group", "aria-label": "Lineage tree" });
  for (const e of lin.edges) {
    const a = pos.get(e.from), b = pos.get(e.to);
    if (a && b) svg.append(s("line", { x1: a[0], y1: a[1], x2: b[0], y2: b[1], class: `edge ${e.kind}` }));
  }
  for (const n of nodes) {
    const [x, y] = pos.get(n.id)!;
    const text = n.type === "sandbox" ? `${n.id.slice(0, 14)}${n.id === current ? " (this)" : ""}` : n.kind === "turn" ? `turn ${n.turn}` : n.name || n.kind || "snapshot";
    const g = s("g", { class: `node ${n.type} ${n.state}`, tabindex: 0, role: "button", "aria-label": `${n.type} ${text}`, "data-id": n.id,
      onclick: () => select(n), onkeydown: (ev: Event) => { const k = (ev as KeyboardEvent).key; if (k === "Enter" || k === " ") { ev.preventDefault(); select(n); } } },
      n.type === "sandbox" ? s("rect", { x: x - 8, y: y - 8, width: 16, height: 16 }) : s("circle", { cx: x, cy: y, r: 7 }),
      s("text", { x: x + 12, y: y + 4 }, text));
    svg.append(g);
  }
  return svg;
}

function nodeActions(box: HTMLElement, n: LNode, enc: string) {
  const id = encodeURIComponent(n.id);
  const run = (what: string, fn: () => Promise<unknown>) => button(what, async () => {
    try { await fn(); status(`${what}: done`); location.reload(); } catch (err) { status((err as Error).message, true); }
  });
  if (n.type === "snapshot") {
    clear(box, h("p", {}, `Snapshot ${n.id}`),
      run("Roll back to this", () => post(`/sandboxes/${enc}/rollback`, { snapshotID: n.id, force: true })),
      run("Fork from this", () => post(`/sandboxes/${enc}/fork`, { snapshotID: n.id })));
  } else {
    clear(box, h("p", {}, `Sandbox ${n.id} (${n.state})`), h("a", { href: `#/sandbox/${id}` }, "Open"), " ",
      n.state !== "destroyed" && `/sandboxes/${id}` !== `/sandboxes/${enc}` ? run("Promote", () => post(`/sandboxes/${id}/promote`)) : null);
  }
}
