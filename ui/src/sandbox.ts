import { call, get, q, Sandbox, Metric, Entry } from "./api";
import { h, clear, age, sparkline, button, status } from "./dom";

const TEXT_LIMIT = 1 << 20;

// The page of one sandbox: terminal, files, processes, log, metrics, events.
export async function sandboxPage(app: HTMLElement, id: string): Promise<() => void> {
  const enc = encodeURIComponent(id);
  const sb = await get<Sandbox>(`/sandboxes/${enc}`);
  const termHost = h("section", { "aria-labelledby": "h-term" }, h("h2", { id: "h-term" }, "Terminal"));
  const files = h("section", { "aria-labelledby": "h-files" }, h("h2", { id: "h-files" }, "Files"));
  const procs = h("section", { "aria-labelledby": "h-procs" }, h("h2", { id: "h-procs" }, "Processes"));
  const logs = h("section", { "aria-labelledby": "h-logs" }, h("h2", { id: "h-logs" }, "Log"));
  const metrics = h("section", { "aria-labelledby": "h-metrics" }, h("h2", { id: "h-metrics" }, "Metrics"));
  const events = h("section", { "aria-labelledby": "h-events" }, h("h2", { id: "h-events" }, "Events"));
  app.append(
    h("h1", {}, `Sandbox ${sb.sandboxID}`),
    h("p", {}, `${sb.state} · ${sb.templateID} · ${sb.runtime} · started ${age(sb.startedAt)} ago · `,
      h("a", { href: `#/history/${enc}` }, "History")),
    h("dl", { class: "meta" }, Object.entries(sb.metadata ?? {}).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    termHost, files, procs, logs, metrics, events);
  const stops: (() => void)[] = [];
  if (sb.state === "running") {
    // xterm.js is most of the JavaScript: loaded only for a terminal, so the
    // list's first paint does not wait for it.
    const { openTerminal } = await import("./terminal");
    stops.push(openTerminal(termHost, id));
  }
  else termHost.append(h("p", {}, "The sandbox is not running."));
  fileBrowser(files, enc, "/home/user");
  stops.push(processList(procs, enc));
  stops.push(followLog(logs, enc));
  metricCharts(metrics, enc);
  clear(events, h("h2", { id: "h-events" }, "Events"),
    h("ul", {}, (sb.events ?? []).map((e) => h("li", {}, `${new Date(e.at).toISOString()} ${e.kind} ${e.cause ?? ""}`))));
  return () => stops.forEach((f) => f());
}

async function fileBrowser(sec: HTMLElement, enc: string, dir: string) {
  const list = h("ul", { class: "files", id: "file-list" });
  const view = h("div", { class: "viewer", id: "file-view" });
  clear(sec, h("h2", { id: "h-files" }, "Files"), h("p", {}, h("strong", {}, dir), " ",
    dir !== "/" ? button("Up", () => fileBrowser(sec, enc, dir.replace(/\/[^/]+\/?$/, "") || "/")) : null), list, view);
  try {
    const entries = await get<Entry[]>(`/sandboxes/${enc}/files/list${q({ path: dir })}`);
    entries.sort((a, b) => (a.type === b.type ? a.name.localeCompare(b.name) : a.type === "dir" ? -1 : 1));
    clear(list, entries.map((e) => h("li", {}, button(e.type === "dir" ? `${e.name}/` : e.name, () => {
      if (e.type === "dir") fileBrowser(sec, enc, e.path);
      else openFile(view, enc, e);
    }, { class: "link", "data-path": e.path }))));
  } catch (err) { clear(list, h("li", { class: "error" }, (err as Error).message)); }
}

async function openFile(view: HTMLElement, enc: string, e: Entry) {
  const url = `/sandboxes/${enc}/files${q({ path: e.path })}`;
  const res = await call("GET", url);
  const blob = await res.blob();
  if (/\.(png|jpe?g|gif|webp)$/i.test(e.name)) {
    const img = h("img", { alt: e.name, src: URL.createObjectURL(blob) });
    clear(view, h("h3", {}, e.path), img);
    return;
  }
  if (blob.size > TEXT_LIMIT) { clear(view, h("h3", {}, e.path), h("p", {}, `${blob.size} bytes: too large to show`)); return; }
  const area = h("textarea", { id: "editor", rows: 16, cols: 80, spellcheck: "false" }) as HTMLTextAreaElement;
  area.value = await blob.text();
  clear(view, h("h3", {}, e.path), h("label", { for: "editor" }, `Contents of ${e.name}`), area,
    button("Save", async () => {
      try { await call("PUT", url, area.value, true); status(`saved ${e.path}`); } catch (err) { status((err as Error).message, true); }
    }, { id: "save" }));
}

interface Proc { pid: number; tag?: string; cmd: string[]; state: string; }

// processList lists the processes; choosing one follows its output (the
// API's NDJSON stream) until another is chosen or the page closes.
function processList(sec: HTMLElement, enc: string): () => void {
  const out = h("pre", { class: "output", id: "proc-output", tabindex: 0, role: "log", "aria-label": "Process output" });
  let following: AbortController | undefined;
  const follow = async (ref: string) => {
    following?.abort();
    const ctl = (following = new AbortController());
    out.textContent = "";
    try {
      const res = await call("GET", `/sandboxes/${enc}/processes/${encodeURIComponent(ref)}/output${q({ follow: "true" })}`, undefined, false, ctl.signal);
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        const lines = buf.split("\n");
        buf = lines.pop() ?? "";
        for (const l of lines.filter(Boolean)) {
          const ev = JSON.parse(l) as { type: string; data?: string; exitCode?: number; error?: string };
          if (ev.data) out.append(new TextDecoder().decode(Uint8Array.from(atob(ev.data), (c) => c.charCodeAt(0))));
          if (ev.type === "exit") out.append(`\n[exited ${ev.exitCode ?? ""}]\n`);
          if (ev.type === "error") out.append(`\n[${ev.error}]\n`);
        }
      }
    } catch (err) { if (!ctl.signal.aborted) out.append(`\n[${(err as Error).message}]\n`); }
  };
  (async () => {
    try {
      const ps = await get<Proc[]>(`/sandboxes/${enc}/processes`);
      sec.append(h("ul", {}, ps.map((p) => h("li", {}, button(`${p.pid} ${p.cmd.join(" ")} (${p.state})`, () => follow(p.tag || String(p.pid)), { class: "link" })))), out);
    } catch (err) { sec.append(h("p", {}, (err as Error).message)); }
  })();
  return () => following?.abort();
}

interface Logs { logEntries: { timestamp: string; level: string; message: string }[]; nextCursor: number; }

function followLog(sec: HTMLElement, enc: string): () => void {
  const pre = h("pre", { class: "output", id: "log", tabindex: 0, role: "log", "aria-label": "Sandbox log" });
  sec.append(pre);
  let cursor = 0, stop = false;
  (async () => {
    while (!stop) {
      try {
        const l = await get<Logs>(`/sandboxes/${enc}/logs${q({ cursor, wait: 20000 })}`);
        for (const e of l.logEntries ?? []) pre.append(`${e.timestamp} ${e.level} ${e.message}\n`);
        cursor = l.nextCursor || cursor;
      } catch { await new Promise((r) => setTimeout(r, 5000)); }
    }
  })();
  return () => { stop = true; };
}

async function metricCharts(sec: HTMLElement, enc: string) {
  try {
    const m = await get<Metric[]>(`/sandboxes/${enc}/metrics`);
    sec.append(h("p", {}, "CPU % ", sparkline(m.map((x) => x.cpuUsedPct), 100, "CPU"),
      " memory ", sparkline(m.map((x) => x.memUsed), m[0]?.memTotal || 1, "memory")));
  } catch (err) { sec.append(h("p", {}, (err as Error).message)); }
}
