// DOM helpers. Text always goes in as text (textContent, attributes): no
// value from the API is ever parsed as HTML, so file names, metadata and
// command output cannot inject markup.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;

export function h(tag: string, attrs: Attrs = {}, ...children: (Child | Child[])[]): HTMLElement {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG = "http://www.w3.org/2000/svg";

export function s(tag: string, attrs: Attrs = {}, ...children: (Child | Child[])[]): SVGElement {
  const el = document.createElementNS(SVG, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el: Element, attrs: Attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function append(el: Element, children: (Child | Child[])[]) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el: Element, ...children: (Child | Child[])[]) {
  el.replaceChildren();
  append(el, children);
}

export function age(iso: string | undefined): string {
  if (!iso) return "";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.floor(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

// sparkline draws values (0..max) as a small SVG polyline.
export function sparkline(values: number[], max: number, label: string): SVGElement {
  const w = 80, ht = 20;
  const pts = values.map((v, i) => `${values.length < 2 ? 0 : (i * w) / (values.length - 1)},${ht - (Math.min(v, max) / (max || 1)) * ht}`);
  return s("svg", { class: "spark", width: w, height: ht, viewBox: `0 0 ${w} ${ht}`, role: "img", "aria-label": label },
    s("polyline", { points: pts.join(" "), fill: "none", stroke: "currentColor", "stroke-width": 1.5 }));
}

export function button(label: string, onclick: () => void, attrs: Attrs = {}): HTMLElement {
  return h("button", { type: "button", onclick: (e: Event) => { e.preventDefault(); onclick(); }, ...attrs }, label);
}

export function status(msg: string, isError = false) {
  const el = document.getElementById("status");
  if (el) { el.textContent = msg; el.className = isError ? "status error" : "status"; }
}
