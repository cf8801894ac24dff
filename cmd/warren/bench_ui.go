package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// uiFlags binds the ui suite's flags.
func (b *benchRun) uiFlags(f *pflag.FlagSet) {
	f.IntVar(&b.ui.Sandboxes, "ui-sandboxes", 500, "ui: sandboxes listed when the dashboard's first paint is timed")
	f.IntVar(&b.ui.Keystrokes, "ui-keystrokes", 200, "ui: keystroke echoes timed in the terminal")
	f.IntVar(&b.ui.Paints, "ui-paints", 5, "ui: dashboard loads timed in headless chromium")
	f.IntVar(&b.ui.Turns, "ui-turns", 1000, "ui: turns taken in one sandbox before its history page is timed")
	f.StringVar(&b.ui.BrowserDir, "ui-browser-dir", "", "ui: the directory of firstpaint.mjs and its node_modules (default: test/e2e/ui beside the binary's bin/, or under the working directory)")
}

// quickUI shrinks the ui suite to a smoke run.
func quickUI(cmd *cobra.Command, b *benchRun) {
	for name, p := range map[string]*int{"ui-sandboxes": &b.ui.Sandboxes, "ui-keystrokes": &b.ui.Keystrokes, "ui-paints": &b.ui.Paints, "ui-turns": &b.ui.Turns} {
		if !cmd.Flags().Changed(name) {
			*p = map[string]int{"ui-sandboxes": 10, "ui-keystrokes": 20, "ui-paints": 2, "ui-turns": 20}[name]
		}
	}
}

// uiBrowserDir finds test/e2e/ui: beside the binary's bin/ (a build in the
// repository), else under the working directory.
func uiBrowserDir() string {
	if exe, err := os.Executable(); err == nil {
		d := filepath.Join(filepath.Dir(exe), "..", "test", "e2e", "ui")
		if _, err := os.Stat(d); err == nil {
			return d
		}
	}
	return filepath.Join("test", "e2e", "ui")
}
