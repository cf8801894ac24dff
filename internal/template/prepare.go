package template

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The sandbox conventions every template follows.
const (
	UserName = "user"
	UserUID  = 1000
	UserGID  = 1000
	UserHome = "/home/user"
	// Workspace is where agents are expected to work.
	Workspace = "/workspace"
	// AgentDir is where the daemon mounts the agent (read-only) in every
	// sandbox.
	AgentDir = "/.warren"
	// Hostname is written to /etc/hostname; the runtime sets the real one.
	Hostname = "sandbox"
)

// Prepare applies the sandbox conventions to the root filesystem at root:
// an unprivileged user `user` (1000:1000) with passwordless sudo when sudo
// is installed, /home/user and /workspace owned by it, a sticky /tmp,
// /etc/hostname, and the /.warren mount point for the agent. It edits the
// files directly rather than running tools in a chroot (the tree may hold
// anything), resolving every path inside root, and it is idempotent.
// /etc/resolv.conf is left as it is: the runtime manages it.
func Prepare(root string) error {
	t, err := openTree(root)
	if err != nil {
		return err
	}
	defer t.Close()

	// The root itself: a tarball's "./" entry or a copied temporary
	// directory may carry 0700, which would lock the user out of /.
	if err := t.ensureDir(".", 0o755, 0, 0); err != nil {
		return err
	}
	for _, d := range []string{"etc", "proc", "sys", "dev", "run", "home"} {
		if !t.exists(d) {
			if err := t.ensureDir(d, 0o755, 0, 0); err != nil {
				return err
			}
		}
	}
	if err := addUser(t); err != nil {
		return err
	}
	if t.isDir("etc/sudoers.d") {
		line := UserName + " ALL=(ALL:ALL) NOPASSWD: ALL\n"
		if err := t.writeFile("etc/sudoers.d/warren-user", []byte(line), 0o440, 0, 0); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		rel      string
		perm     uint32
		uid, gid int
	}{
		{strings.TrimPrefix(UserHome, "/"), 0o755, UserUID, UserGID},
		{strings.TrimPrefix(Workspace, "/"), 0o755, UserUID, UserGID},
		{"tmp", 0o1777, 0, 0},
		{strings.TrimPrefix(AgentDir, "/"), 0o755, 0, 0},
	} {
		if err := t.ensureDir(d.rel, d.perm, d.uid, d.gid); err != nil {
			return err
		}
	}
	if err := copySkel(t); err != nil {
		return err
	}
	if err := quickProfile(t); err != nil {
		return err
	}
	return t.writeFile("etc/hostname", []byte(Hostname+"\n"), 0o644, 0, 0)
}

// slowUID and fastUID: Debian's /etc/profile asks `id -u` twice, two
// forks that make up most of a login shell's start (E2B's SDKs run every
// command as `bash -l -c`: 4.4 ms instead of 1.4 ms here). bash knows its
// effective uid as $EUID; other shells leave it unset and still ask id.
const (
	slowUID = `"$(id -u)"`
	fastUID = `"${EUID:-$(id -u)}"`
)

// quickProfile makes /etc/profile use $EUID where the shell has it.
func quickProfile(t *tree) error {
	if !t.exists("etc/profile") || t.isDir("etc/profile") {
		return nil
	}
	b, err := t.readFile("etc/profile")
	if err != nil || !strings.Contains(string(b), slowUID) {
		return err
	}
	return t.writeFile("etc/profile", []byte(strings.ReplaceAll(string(b), slowUID, fastUID)), 0o644, 0, 0)
}

// addUser adds `user` and its group to passwd, group, shadow and gshadow
// where they are missing. Its password is locked: it logs in through the
// agent, never with a password.
func addUser(t *tree) error {
	shell := "/bin/sh"
	if t.exists("bin/bash") {
		shell = "/bin/bash"
	}
	days := time.Now().Unix() / 86400
	entries := []struct {
		rel      string
		line     string
		perm     uint32
		optional bool
	}{
		{"etc/passwd", fmt.Sprintf("%s:x:%d:%d::%s:%s", UserName, UserUID, UserGID, UserHome, shell), 0o644, false},
		{"etc/group", fmt.Sprintf("%s:x:%d:", UserName, UserGID), 0o644, false},
		{"etc/shadow", fmt.Sprintf("%s:!:%d:0:99999:7:::", UserName, days), 0o640, true},
		{"etc/gshadow", fmt.Sprintf("%s:!::", UserName), 0o640, true},
	}
	for _, e := range entries {
		if err := appendEntry(t, e.rel, e.line, e.perm, e.optional); err != nil {
			return err
		}
	}
	return nil
}

// appendEntry adds line to a colon-separated database unless an entry of
// the same name is there. A missing optional file is left missing.
func appendEntry(t *tree, rel, line string, perm uint32, optional bool) error {
	data, err := t.readFile(rel)
	if errors.Is(err, os.ErrNotExist) {
		if optional {
			return nil
		}
		data = nil
	} else if err != nil {
		return err
	}
	name := line[:strings.IndexByte(line, ':')+1]
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, name) {
			return nil
		}
	}
	uid, gid := 0, 0
	if st, err := t.lstat(rel); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		// Keep the file's owner and mode (shadow is root:shadow 0640 on Debian).
		uid, gid, perm = int(st.Uid), int(st.Gid), st.Mode&0o7777
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	data = append(data, line+"\n"...)
	return t.writeFile(rel, data, perm, uid, gid)
}

// copySkel copies the top-level regular files of /etc/skel (.bashrc,
// .profile) into the user's home where they are missing, as useradd would.
func copySkel(t *tree) error {
	fd, err := t.openIn("etc/skel", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil // no skeleton: nothing to copy
	}
	names, err := readDirNames(fd)
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("list /etc/skel: %w", err)
	}
	home := strings.TrimPrefix(UserHome, "/")
	for _, n := range names {
		st, err := t.lstat("etc/skel/" + n)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if _, err := t.lstat(home + "/" + n); err == nil {
			continue
		}
		data, err := t.readFile("etc/skel/" + n)
		if err != nil {
			return err
		}
		if err := t.writeFile(home+"/"+n, data, st.Mode&0o777, UserUID, UserGID); err != nil {
			return err
		}
	}
	return nil
}
