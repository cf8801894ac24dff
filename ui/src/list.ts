import { call, get, post, json, q, Sandbox, Metric } from "./api";
import { h, clear, age, sparkline, button, status } from "./dom";
import { nodesPanel } from "./nodes";

const PAGE = 50;

// The sandboxes page: a filtered, paged table (one page of at most 50 rows
// in the DOM, so 500 sandboxes stay smooth), sparklines for running ones.
export async function sandboxesPage(app: HTMLElement): Promise<() => void> {
  const state = h("select", { id: "f-state" }, ["", "running", "paused", "hibernated", "stopped"].map((v) => h("option", { value: v }, v || "any"))) as HTMLSelectElement;
  const template = h("input", { id: "f-template", placeholder: "base" }) as HTMLInputElement;
  const meta = h("input", { id: "f-meta", placeholder: "key=value" }) as HTMLInputElement;
  const newTemplate = h("input", { id: "new-template", value: "base" }) as HTMLInputElement;
  const tbody = h("tbody");
  const pager = h("div", { class: "pager" });
  const tokens: string[] = [""];
  let page = 0;
  let timer = 0;

  async function load() {
    const list = await fetchPage(tokens[page]);
    clear(tbody, list.items.map(row));
    if (list.next) tokens[page + 1] = list.next;
    clear(pager,
      button("Previous", () => { page--; load(); }, { disabled: page === 0 }),
      h("span", {}, `Page ${page + 1}`),
      button("Next", () => { page++; load(); }, { disabled: !list.next }));
    status(`${list.items.length} sandboxes on this page`);
    sparks(list.items.filter((s) => s.state === "running").slice(0, 20));
  }

  async function fetchPage(token: string) {
    const res = await call("GET", "/sandboxes" + q({ limit: PAGE, nextToken: token, state: state.value, template: template.value.trim(), metadata: meta.value.trim() }));
    return { items: (await res.json()) as Sandbox[], next: res.headers.get("X-Next-Token") ?? "" };
  }

  async function sparks(running: Sandbox[]) {
    await Promise.all(running.map(async (sb) => {
      const cell = document.getElementById(`spark-${sb.sandboxID}`);
      if (!cell) return;
      try {
        const m = await get<Metric[]>(`/sandboxes/${encodeURIComponent(sb.sandboxID)}/metrics`);
        clear(cell, sparkline(m.map((x) => x.cpuUsedPct), 100, `CPU of ${sb.sandboxID}`),
          sparkline(m.map((x) => x.memUsed), m[0]?.memTotal || 1, `memory of ${sb.sandboxID}`));
      } catch { /* gone since the list */ }
    }));
  }

  function act(label: string, fn: () => Promise<unknown>) {
    return button(label, async () => {
      try { await fn(); status(`${label}: done`); await load(); } catch (e) { status(String((e as Error).message), true); }
    });
  }

  function row(sb: Sandbox): HTMLElement {
    const id = encodeURIComponent(sb.sandboxID);
    const md = Object.entries(sb.metadata ?? {}).map(([k, v]) => h("span", { class: "tag" }, `${k}=${v}`));
    return h("tr", { "data-id": sb.sandboxID },
      h("td", {}, h("a", { href: `#/sandbox/${id}` }, sb.sandboxID)),
      h("td", {}, sb.state), h("td", {}, sb.templateID), h("td", {}, sb.runtime),
      h("td", {}, age(sb.startedAt)), h("td", {}, md), h("td", {}, sb.node ?? ""),
      h("td", { id: `spark-${sb.sandboxID}`, class: "sparks" }),
      h("td", { class: "actions" },
        sb.state === "running" ? act("Pause", () => post(`/sandboxes/${id}/pause`)) : act("Resume", () => post(`/sandboxes/${id}/resume`)),
        act("Snapshot", () => post(`/sandboxes/${id}/snapshots`)),
        h("a", { href: `#/history/${id}` }, "History"),
        act("Kill", () => json("DELETE", `/sandboxes/${id}`))));
  }

  const filters = h("form", { class: "filters", onsubmit: (e: Event) => { e.preventDefault(); tokens.length = 1; page = 0; load(); } },
    h("label", { for: "f-state" }, "State"), state,
    h("label", { for: "f-template" }, "Template"), template,
    h("label", { for: "f-meta" }, "Metadata"), meta,
    h("button", { type: "submit" }, "Filter"));
  const create = h("form", { class: "filters", onsubmit: async (e: Event) => {
    e.preventDefault();
    try { await post("/sandboxes", { templateID: newTemplate.value.trim() }); await load(); } catch (err) { status((err as Error).message, true); }
  } }, h("label", { for: "new-template" }, "Template"), newTemplate, h("button", { type: "submit" }, "Create sandbox"));

  app.append(h("h1", {}, "Sandboxes"), filters, create,
    h("table", { class: "list" },
      h("thead", {}, h("tr", {}, ["Sandbox", "State", "Template", "Runtime", "Age", "Metadata", "Node", "CPU / memory", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
      tbody), pager);
  await load();
  nodesPanel().then((p) => { if (p) app.append(p); });
  timer = window.setInterval(() => { if (document.visibilityState === "visible") load().catch(() => {}); }, 10000);
  return () => clearInterval(timer);
}
