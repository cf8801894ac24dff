package users

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// DefaultsPath is where a built template records its last USER and WORKDIR
// ("user=NAME" and "workdir=PATH" lines). It lives in the sandbox's own tree,
// so the defaults follow every snapshot: pause/resume, fork, restart.
const DefaultsPath = "/etc/warren/defaults"

// Defaults are a template's default user and working directory; empty
// fields mean the built-in defaults.
type Defaults struct {
	User    string
	Workdir string
}

// ReadDefaults parses the defaults file at path; a missing or unreadable
// file is no defaults.
func ReadDefaults(path string) Defaults {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Defaults{}
	}
	var d Defaults
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "user":
			d.User = v
		case "workdir":
			if filepath.IsAbs(v) {
				d.Workdir = filepath.Clean(v)
			}
		}
	}
	return d
}

// templateUser is the defaults file's user when /etc/passwd lists it. A
// build's steps ran as that user, so a miss means the tree was changed
// since: fall back to the built-in default, and say so.
func (db DB) templateUser(entries []passwdEntry) (string, bool) {
	if db.DefaultsPath == "" {
		return "", false
	}
	name := ReadDefaults(db.DefaultsPath).User
	if name == "" {
		return "", false
	}
	for _, e := range entries {
		if e.name == name {
			return name, true
		}
	}
	slog.Warn("template default user is not in /etc/passwd, using the built-in default", "user", name)
	return "", false
}

// DefaultDir is the directory a command without a cwd starts in (and a
// relative cwd is resolved against): the template's last WORKDIR when it
// recorded one that exists, else home.
func (db DB) DefaultDir(home string) string {
	if db.DefaultsPath == "" {
		return home
	}
	wd := ReadDefaults(db.DefaultsPath).Workdir
	if wd == "" {
		return home
	}
	if fi, err := os.Stat(wd); err != nil || !fi.IsDir() {
		slog.Warn("template default workdir is not a directory, using home", "workdir", wd)
		return home
	}
	return wd
}
