import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";
import { getKey } from "./api";
import { h } from "./dom";

// keyProtocol carries the API key as a WebSocket subprotocol (a browser
// cannot set headers on a WebSocket): base64url, so it is a valid token.
function keyProtocol(key: string): string {
  const b = btoa(String.fromCharCode(...new TextEncoder().encode(key)));
  return "warren.key." + b.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// openTerminal joins an xterm.js terminal to GET /sandboxes/{id}/terminal.
export function openTerminal(host: HTMLElement, id: string): () => void {
  const term = new Terminal({ cursorBlink: true, fontSize: 14, screenReaderMode: false, convertEol: false });
  const fit = new FitAddon();
  term.loadAddon(fit);
  const box = h("div", { class: "terminal", id: "terminal" });
  const state = h("p", { class: "status", id: "term-state", role: "status" }, "connecting…");
  host.append(box, state);
  term.open(box);
  fit.fit();
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const url = `${proto}//${location.host}/sandboxes/${encodeURIComponent(id)}/terminal?cols=${term.cols}&rows=${term.rows}`;
  const ws = new WebSocket(url, ["warren.terminal.v1", keyProtocol(getKey() ?? "")]);
  ws.binaryType = "arraybuffer";
  const enc = new TextEncoder();
  ws.onopen = () => { state.textContent = "connected"; term.focus(); };
  ws.onmessage = (ev) => {
    if (typeof ev.data === "string") {
      const m = JSON.parse(ev.data);
      state.textContent = m.error ? `ended: ${m.error}` : `exited with ${m.exit}`;
      return;
    }
    term.write(new Uint8Array(ev.data as ArrayBuffer));
  };
  ws.onclose = () => { if (state.textContent === "connecting…" || state.textContent === "connected") state.textContent = "disconnected"; };
  const onData = term.onData((d) => { if (ws.readyState === WebSocket.OPEN) ws.send(enc.encode(d)); });
  const onResize = term.onResize(({ cols, rows }) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ resize: { cols, rows } }));
  });
  const refit = () => fit.fit();
  window.addEventListener("resize", refit);
  // Exposed for the browser test and the keystroke-echo benchmark.
  (window as unknown as { warrenTerm: Terminal }).warrenTerm = term;
  return () => {
    window.removeEventListener("resize", refit);
    onData.dispose(); onResize.dispose();
    ws.close(); term.dispose();
  };
}
