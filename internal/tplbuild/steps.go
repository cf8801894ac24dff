package tplbuild

import (
	"context"
	"fmt"
	"maps"
	"path"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/commands"
)

// envFile is where ENV steps leave their variables: every login shell
// (the SDK runs commands with bash -l) of the template's sandboxes reads it.
const envFile = "/etc/profile.d/zz-warren-template-env.sh"

// copyScript extracts a copy's archive and copies its source to the
// destination as a Dockerfile COPY does: a directory's contents into the
// destination directory, a file to the path (or into it when it ends in
// "/"), then gives what it copied to the step's user and mode.
const copyScript = `set -eu
d=$(mktemp -d /tmp/.warren-copy-XXXXXX)
trap 'rm -rf "$d" "$WB_TAR"' EXIT
tar -x${WB_Z}f "$WB_TAR" -C "$d" --no-same-owner
src="$d/$WB_SRC"
[ -e "$src" ] || [ -L "$src" ] || { echo "COPY: $WB_SRC is not in the uploaded files" >&2; exit 1; }
if [ -d "$src" ] && [ ! -L "$src" ]; then
	# A destination the copy makes is the step user's, as with COPY --chown.
	[ -e "$WB_DEST" ] || { mkdir -p "$WB_DEST"; chown "$WB_USER:" "$WB_DEST"; }
	set -- "$src"/* "$src"/.[!.]* "$src"/..?*
	for f do
		[ -e "$f" ] || [ -L "$f" ] || continue
		cp -a "$f" "$WB_DEST/"
		echo "$WB_DEST/$(basename "$f")" >>"$d.list"
	done
else
	case "$WB_DEST" in */) mkdir -p "$WB_DEST"; t="$WB_DEST$(basename "$src")";; *) mkdir -p "$(dirname "$WB_DEST")"; t="$WB_DEST";; esac
	cp -a "$src" "$t"
	echo "$t" >>"$d.list"
fi
touch "$d.list"
while IFS= read -r f; do
	chown -R -h "$WB_USER:" "$f"
	if [ -n "$WB_MODE" ]; then find "$f" -type f -exec chmod "$WB_MODE" {} +; fi
done <"$d.list"
rm -f "$d.list"
`

// runStep runs one step in the build sandbox and applies its effect on
// the state of the steps after it.
func (r *runner) runStep(ctx context.Context, i int, st Step) error {
	var err error
	switch st.Type {
	case "RUN":
		user := r.user
		if len(st.Args) > 1 && st.Args[1] != "" {
			user = st.Args[1]
		}
		err = r.exec(ctx, i, client.ExecRequest{Command: st.Args[0], User: user, Cwd: r.workdir, Env: r.env})
	case "COPY":
		err = r.copy(ctx, i, st)
	case "WORKDIR":
		dir := r.resolve(st.Args[0])
		err = r.exec(ctx, i, r.recordDefaults(`mkdir -p -- "$WB_DIR"`, r.user, dir))
	case "USER":
		err = r.exec(ctx, i, r.recordDefaults(`id -u -- "$WB_USER" >/dev/null`, st.Args[0], r.workdir))
	case "ENV":
		err = r.setEnv(ctx, i, st.Args)
	}
	if err != nil {
		return err
	}
	r.apply(st)
	return nil
}

// apply is a step's effect on the steps after it.
func (r *runner) apply(st Step) {
	switch st.Type {
	case "WORKDIR":
		r.workdir = r.resolve(st.Args[0])
	case "USER":
		r.user = st.Args[0]
	case "ENV":
		r.env = maps.Clone(r.env)
		for i := 0; i+1 < len(st.Args); i += 2 {
			r.env[st.Args[i]] = st.Args[i+1]
		}
	}
}

func (r *runner) resolve(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(r.workdir, p)
}

// exec runs a step's command; a failure (exit code, signal, timeout)
// fails the step with its output in the log.
func (r *runner) exec(ctx context.Context, i int, req client.ExecRequest) error {
	step := strconv.Itoa(i + 1)
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMs = uint32(max(1, min(int64(^uint32(0)), timeUntilMs(dl))))
	}
	res, err := r.s.cfg.Commands.ExecWait(ctx, r.team, r.sandbox, req)
	if err != nil {
		return &stepError{step: i, msg: fmt.Sprintf("step %d (%s): %v", i+1, describe(r.steps[i]), err)}
	}
	r.log.output("info", step, res.Stdout)
	if res.ExitCode == 0 && res.Signal == "" && !res.TimedOut && res.Error == "" {
		r.log.output("info", step, res.Stderr)
		return nil
	}
	failed := r.log.output("error", step, res.Stderr)
	r.log.mu.Lock()
	r.log.failure = failed
	r.log.mu.Unlock()
	why := fmt.Sprintf("exit code %d", res.ExitCode)
	switch {
	case res.TimedOut:
		why = "timed out (the build's timeout)"
	case res.Signal != "":
		why = "killed by " + res.Signal
	case res.Error != "":
		why = res.Error
	}
	return &stepError{step: i, msg: fmt.Sprintf("step %d (%s) failed: %s: %s", i+1, describe(r.steps[i]), why, tail(res.Stderr, 2000))}
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// copy puts a copy's uploaded archive in the sandbox and unpacks it there
// (copyScript): the archive was checked when it was uploaded.
func (r *runner) copy(ctx context.Context, i int, st Step) error {
	f, gz, err := r.s.files.Open(r.team, st.FilesHash)
	if err != nil {
		return &stepError{step: i, msg: fmt.Sprintf("step %d: %v", i+1, err)}
	}
	defer f.Close()
	tarPath := "/tmp/.warren-copy-" + st.FilesHash + ".tar"
	if _, err := r.s.cfg.Commands.WriteFile(ctx, r.team, r.sandbox, commands.WriteFileRequest{Path: tarPath, Mode: 0o600, User: "root"}, f); err != nil {
		return &stepError{step: i, msg: fmt.Sprintf("step %d: upload files into the build sandbox: %v", i+1, err)}
	}
	user := r.user
	if len(st.Args) > 2 && st.Args[2] != "" {
		user = st.Args[2]
	}
	mode := ""
	if len(st.Args) > 3 {
		mode = st.Args[3]
	}
	z := ""
	if gz {
		z = "z"
	}
	src := strings.TrimSuffix(strings.TrimPrefix(path.Clean("/"+st.Args[0]), "/"), "/")
	env := map[string]string{"WB_TAR": tarPath, "WB_Z": z, "WB_SRC": src, "WB_DEST": r.resolveDest(st.Args[1]), "WB_USER": user, "WB_MODE": mode}
	return r.exec(ctx, i, client.ExecRequest{Cmd: []string{"/bin/sh", "-c", copyScript}, User: "root", Cwd: "/", Env: env})
}

// resolveDest keeps a destination's trailing "/" (copy into it).
func (r *runner) resolveDest(p string) string {
	d := r.resolve(p)
	if strings.HasSuffix(p, "/") && d != "/" {
		d += "/"
	}
	return d
}

// setEnv appends the variables to envFile, single-quoted for any POSIX
// shell (the file is read by login shells, bash or not).
func (r *runner) setEnv(ctx context.Context, i int, args []string) error {
	var lines strings.Builder
	for j := 0; j+1 < len(args); j += 2 {
		fmt.Fprintf(&lines, "export %s='%s'\n", args[j], strings.ReplaceAll(args[j+1], "'", `'\''`))
	}
	// An image without /etc/profile (busybox, scratch-built) gets one that
	// reads profile.d, so that login shells see the variables there too.
	script := `mkdir -p "$(dirname ` + envFile + `)" && printf '%s' "$WB_LINES" >>` + envFile +
		` && { [ -e /etc/profile ] || echo 'for f in /etc/profile.d/*.sh; do [ -r "$f" ] && . "$f"; done' >/etc/profile; }`
	return r.exec(ctx, i, client.ExecRequest{Cmd: []string{"/bin/sh", "-c", script}, User: "root", Cwd: "/", Env: map[string]string{"WB_LINES": lines.String()}})
}

// defaultsFile is where the agent reads a template's default user and
// working directory (agent/internal/users.DefaultsPath). It is part of the
// tree, so every snapshot of a sandbox of the template keeps it.
const defaultsFile = "/etc/warren/defaults"

// recordDefaults is a WORKDIR or USER step: check runs first, then the
// step's user and workdir become the template's defaults for its sandboxes.
func (r *runner) recordDefaults(check, user, dir string) client.ExecRequest {
	script := check + ` && mkdir -p /etc/warren && printf 'user=%s\nworkdir=%s\n' "$WB_USER" "$WB_DIR" >` + defaultsFile
	return client.ExecRequest{Cmd: []string{"/bin/sh", "-c", script}, User: "root", Cwd: "/",
		Env: map[string]string{"WB_USER": user, "WB_DIR": dir}}
}
