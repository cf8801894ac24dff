import { get } from "./api";
import { h } from "./dom";

interface Amount { memoryBytes: number; milliCPU: number; diskBytes: number; sandboxes: number; }
interface FleetNode { name: string; ready: boolean; unschedulable: boolean; runtimes: string[]; capacity: Amount; used: Amount; }

// nodesPanel is the fleet's nodes and their capacity, for a page served
// through the gateway (its /health names a gatewayId); a single daemon has
// no nodes to show, so the panel is left out and /fleet/nodes not asked.
export async function nodesPanel(): Promise<HTMLElement | null> {
  try {
    const health = await get<{ gatewayId?: string }>("/health");
    if (!health.gatewayId) return null;
    const nodes = await get<FleetNode[]>("/fleet/nodes");
    return h("section", { "aria-labelledby": "h-nodes", id: "nodes" }, h("h2", { id: "h-nodes" }, `Nodes (${nodes.length})`),
      h("table", { class: "list" },
        h("thead", {}, h("tr", {}, ["Node", "State", "Sandboxes", "Memory", "CPU", "Runtimes"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, nodes.map((n) => h("tr", { "data-node": n.name },
          h("td", {}, n.name),
          h("td", {}, n.ready ? (n.unschedulable ? "ready, cordoned" : "ready") : "not ready"),
          h("td", {}, of(n.used.sandboxes, n.capacity.sandboxes, String)),
          h("td", {}, of(n.used.memoryBytes, n.capacity.memoryBytes, gib)),
          h("td", {}, of(n.used.milliCPU, n.capacity.milliCPU, (m) => (m / 1000).toFixed(1))),
          h("td", {}, n.runtimes.join(", ")))))));
  } catch { return null; }
}

function of(used: number, capacity: number, fmt: (n: number) => string): string {
  return capacity ? `${fmt(used)} / ${fmt(capacity)}` : fmt(used);
}

function gib(b: number): string { return `${(b / 2 ** 30).toFixed(1)} GiB`; }
