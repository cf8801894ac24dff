// Package selfexe keeps sandbox starts from copying the warren binary.
//
// libcontainer runs each sandbox's `init` from a sealed copy of the
// binary, so that no sandbox can overwrite the host's (CVE-2019-5736).
// It makes that copy with a read-only overlayfs mount of the binary's
// directory beside the sandbox's state directory, 0.2 ms. Where overlayfs
// refuses (the state directory is inside the binary's, as with a data
// directory kept beside the binary, or the binary's directory is already
// two overlayfs layers deep) it copies the 37 MB binary into a sealed
// memfd instead: 22 ms of every start. Unless the process already runs
// from such a sealed copy: then it uses itself. SealIfCopied makes the
// daemon run from one, made once.
package selfexe

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"
)

// envPath names the binary's path on disk in a process re-executed from a
// sealed copy (whose /proc/self/exe is the memfd).
const envPath = "WARREN_EXE"

// Path returns the path of the running warren binary on disk, also in a
// process running from a sealed copy.
func Path() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(exe, "/memfd:") {
		if p := os.Getenv(envPath); p != "" {
			return p, nil
		}
		return "", fmt.Errorf("warren runs from an in-memory copy (%s) and %s does not say from where", exe, envPath)
	}
	return exe, nil
}

// SealIfCopied re-executes the process, with the same arguments, from a
// sealed in-memory copy of its binary when libcontainer would otherwise
// copy the binary at every sandbox start; stateDir is the runtime's state
// directory (made if missing), where libcontainer makes its copies. It
// returns nil without doing anything when the process runs from a sealed
// copy already or libcontainer's cheap way works; it does not return when
// it re-executes.
func SealIfCopied(log *slog.Logger, stateDir string) error {
	if exeseal.IsSelfExeCloned() {
		return nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	// Where libcontainer will try: beside a sandbox's state directory.
	dir, err := os.MkdirTemp(stateDir, ".exe-probe-")
	if err != nil {
		return err
	}
	sealed, err := exeseal.CloneSelfExe(dir)
	// Gone before a re-exec, which runs no deferred call.
	if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		if sealed != nil {
			sealed.Close()
		}
		return fmt.Errorf("seal a copy of the warren binary: %w", err)
	}
	defer sealed.Close()
	if !exeseal.IsCloned(sealed) {
		return nil // an overlayfs view: what every start gets, cheaply
	}
	orig, err := os.Executable()
	if err != nil {
		return err
	}
	env := []string{envPath + "=" + orig}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPath+"=") {
			env = append(env, kv)
		}
	}
	log.Info("re-executing from a sealed in-memory copy of the binary, made once: overlayfs refuses its directory as a layer beside the state directory, so every sandbox start would copy it (keep the data directory outside the binary's)", "binary", orig, "state", stateDir)
	return fmt.Errorf("re-execute from a sealed copy: %w", unix.Exec(fmt.Sprintf("/proc/self/fd/%d", sealed.Fd()), os.Args, env))
}
