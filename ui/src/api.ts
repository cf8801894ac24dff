// The API client: same origin only, the key from sessionStorage in
// X-API-Key. A relative URL cannot reach another origin, so the key never
// leaves for one.

const KEY = "warren.apiKey";

export function getKey(): string | null { return sessionStorage.getItem(KEY); }
export function setKey(k: string) { sessionStorage.setItem(KEY, k); }
export function signOut() { sessionStorage.removeItem(KEY); }

export class ApiError extends Error {
  constructor(public status: number, message: string) { super(message); }
}

export async function call(method: string, path: string, body?: unknown, raw = false, signal?: AbortSignal): Promise<Response> {
  if (!path.startsWith("/") || path.startsWith("//")) throw new Error("same-origin paths only");
  const key = getKey();
  if (!key) throw new ApiError(401, "sign in with an API key");
  const headers: Record<string, string> = { "X-API-Key": key };
  let payload: BodyInit | undefined;
  if (body !== undefined) {
    if (raw) { payload = body as BodyInit; headers["Content-Type"] = "application/octet-stream"; }
    else { payload = JSON.stringify(body); headers["Content-Type"] = "application/json"; }
  }
  const res = await fetch(path, { method, headers, body: payload, credentials: "omit", referrerPolicy: "no-referrer", signal });
  if (!res.ok) {
    let msg = res.statusText;
    try { const j = await res.json(); msg = j.message ?? msg; } catch { /* not JSON */ }
    throw new ApiError(res.status, `${res.status}: ${msg}`);
  }
  return res;
}

export async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await call(method, path, body);
  if (res.status === 204) return undefined as T;
  return res.json() as Promise<T>;
}

export const get = <T>(path: string) => json<T>("GET", path);
export const post = <T>(path: string, body: unknown = {}) => json<T>("POST", path, body);

export function q(params: Record<string, string | number | undefined>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") u.set(k, String(v));
  const s = u.toString();
  return s ? `?${s}` : "";
}

export interface Sandbox {
  sandboxID: string; templateID: string; state: string; runtime: string; startedAt: string;
  metadata?: Record<string, string>; cpuCount: number; memoryMB: number; family?: string; head?: string;
  turn?: number; node?: string; events?: { at: string; kind: string; cause?: string }[];
}
export interface Metric { timestampUnix: number; cpuUsedPct: number; memUsed: number; memTotal: number; }
export interface Entry { name: string; path: string; type: string; size: number; }
export interface Snapshot { snapshotID: string; kind: string; turn?: number; name?: string; parentID?: string; createdAt: string; sandboxID: string; state: string; }
export interface LNode { id: string; type: string; state: string; name?: string; kind?: string; turn?: number; createdAt?: string; head?: string; }
export interface LEdge { kind: string; from: string; to: string; at: string; }
export interface Lineage { family: string; templateID: string; nodes: LNode[]; edges: LEdge[]; }
export interface DiffEntry { path: string; change: string; type: string; diff?: string; }
export interface Diff { from: string; to: string; changes: DiffEntry[]; }
