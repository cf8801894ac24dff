// Command setids runs a program with all its user and group ids set to
// one uid: `setids UID PROG [ARG...]`. The isolation tests install it
// setuid root inside a sandbox, as sudo is, and check what a sandbox
// user gains through it: `setids 1000 setids 0 sh -c …` is an
// unprivileged user raising itself to root. Without no_new_privs the
// inner setids runs with euid 0 and may switch; with it, the switch fails.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: setids UID PROG [ARG...]")
		os.Exit(2)
	}
	uid, err := strconv.Atoi(os.Args[1])
	if err != nil || uid < 0 {
		fmt.Fprintf(os.Stderr, "setids: bad uid %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := switchTo(uid); err != nil {
		fmt.Fprintf(os.Stderr, "setids: become uid %d (euid %d): %v\n", uid, os.Geteuid(), err)
		os.Exit(126)
	}
	prog, err := exec.LookPath(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "setids:", err)
		os.Exit(127)
	}
	err = syscall.Exec(prog, os.Args[2:], os.Environ())
	fmt.Fprintln(os.Stderr, "setids: exec:", err)
	os.Exit(126)
}

func switchTo(uid int) error {
	if err := syscall.Setgroups(nil); err != nil && os.Geteuid() == 0 {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid: %w", err)
	}
	return nil
}
