// Package ui serves the web dashboard: the Vite build of ui/ (committed in
// dist, so a daemon builds without node), at /ui/ on the daemon's listener.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed dist
var dist embed.FS

// CSP is the dashboard's Content-Security-Policy: its own scripts only (no
// inline script, no eval), API calls and the terminal's WebSocket to its own
// origin, and no framing. Inline styles are allowed because xterm.js writes
// its theme and cell sizes into <style> elements it creates; styles cannot
// run code.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Files is the built dashboard.
func Files() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern names dist: it exists
	}
	return sub
}

// Handler serves the dashboard under /ui/. A path that names no file is a
// page of the single-page app: it gets index.html.
func Handler() http.Handler {
	files := Files()
	static := http.StripPrefix("/ui", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/ui")
		name = strings.TrimPrefix(name, "/")
		if name == "" || !exists(files, name) {
			h.Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, files, "index.html")
			return
		}
		if strings.HasPrefix(name, "assets/") {
			// Vite names assets by their content's hash.
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		static.ServeHTTP(w, r)
	})
}

func exists(files fs.FS, name string) bool {
	st, err := fs.Stat(files, name)
	return err == nil && !st.IsDir()
}
