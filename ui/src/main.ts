import "./style.css";
import { getKey, setKey, signOut, get, ApiError } from "./api";
import { h, clear, status } from "./dom";
import { sandboxesPage } from "./list";
import { sandboxPage } from "./sandbox";
import { historyPage } from "./history";

// Pages are hash routes (#/, #/sandbox/ID, #/history/ID), so the daemon
// serves one page and a reload keeps the place.

const app = document.getElementById("app")!;
let cleanup: (() => void) | undefined;

function signInPage(message = "") {
  const input = h("input", { id: "key", type: "password", autocomplete: "off", required: true }) as HTMLInputElement;
  const form = h("form", { class: "card signin", onsubmit: async (e: Event) => {
    e.preventDefault();
    setKey(input.value.trim());
    try {
      await get("/sandboxes?limit=1");
      location.hash = "#/";
      route();
    } catch (err) {
      signOut();
      signInPage(err instanceof ApiError && err.status === 401 ? "That key was refused." : String(err));
    }
  } },
    h("h1", {}, "Sign in"),
    h("p", {}, "The key stays in this tab's session storage and goes only to this server."),
    h("label", { for: "key" }, "API key"), input,
    h("button", { type: "submit" }, "Sign in"),
    message ? h("p", { class: "error", role: "alert", id: "signin-error" }, message) : null);
  clear(app, form);
  input.focus();
}

function nav() {
  const el = document.getElementById("nav")!;
  clear(el, getKey() ? [
    h("a", { href: "#/" }, "Sandboxes"),
    h("button", { type: "button", class: "link", onclick: () => { signOut(); route(); } }, "Sign out"),
  ] : []);
}

async function route() {
  cleanup?.();
  cleanup = undefined;
  nav();
  if (!getKey()) { signInPage(); return; }
  const path = location.hash.replace(/^#/, "") || "/";
  const [, page, id] = path.split("/");
  clear(app, h("p", { id: "status", class: "status", role: "status" }));
  try {
    if (page === "sandbox" && id) cleanup = await sandboxPage(app, decodeURIComponent(id));
    else if (page === "history" && id) cleanup = await historyPage(app, decodeURIComponent(id));
    else cleanup = await sandboxesPage(app);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) { signOut(); signInPage("That key was refused."); return; }
    status(String(err instanceof Error ? err.message : err), true);
  }
}

window.addEventListener("hashchange", route);
route();
