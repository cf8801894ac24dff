import { defineConfig } from "vite";

// The build lands in internal/ui/dist, which the daemon embeds; it is
// committed, and TestCommittedBuildIsFresh checks it matches a fresh build.
export default defineConfig({
  base: "/ui/",
  build: {
    outDir: "../internal/ui/dist",
    emptyOutDir: true,
    target: "es2022",
    // No inline module-preload polyfill: the CSP allows no inline script.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
});
