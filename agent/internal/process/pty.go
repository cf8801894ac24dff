package process

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openPTY makes a pseudo-terminal pair. The master is non-blocking (so it
// takes read and write deadlines) and close-on-exec; the slave is a raw fd
// for the child. Inside a sandbox /dev/ptmx points at the sandbox's own
// devpts instance.
func openPTY() (master *os.File, slave int, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(mfd)
		}
	}()
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return nil, -1, fmt.Errorf("unlock pty: %w", err)
	}
	slave, err = openPeer(mfd)
	if err != nil {
		return nil, -1, err
	}
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), slave, nil
}

// openPeer opens the slave of master. TIOCGPTPEER needs no path, so it
// works whatever devpts instance /dev/pts is; older kernels get the path.
func openPeer(master int) (int, error) {
	const flags = unix.O_RDWR | unix.O_NOCTTY | unix.O_CLOEXEC
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, flags)
	if errno == 0 {
		return int(fd), nil
	}
	n, err := unix.IoctlGetUint32(master, unix.TIOCGPTN)
	if err != nil {
		return -1, fmt.Errorf("pty number: %w", err)
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	sfd, err := unix.Open(name, flags, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", name, err)
	}
	return sfd, nil
}

// setWinsize sets a terminal's size; the kernel sends SIGWINCH to its
// foreground process group.
func setWinsize(f *os.File, cols, rows uint16) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	}); err != nil {
		return err
	}
	return ierr
}

// startPTY forks the command as the leader of a new session whose
// controlling terminal is a fresh pseudo-terminal, on its stdin, stdout and
// stderr. The running command's stdout is the master (all output comes from
// there) and its stdin a second handle on the master, so input and closing
// it go through the same paths as a pipe's.
func (s *Service) startPTY(sp *spec, cols, rows uint16) (r *running, err error) {
	master, slave, err := openPTY()
	if err != nil {
		return nil, err
	}
	defer unix.Close(slave) // the child has its own copies
	defer func() {
		if err != nil {
			master.Close()
		}
	}()
	if err := setWinsize(master, cols, rows); err != nil {
		return nil, fmt.Errorf("set terminal size: %w", err)
	}
	if sp.cred != nil {
		// Like a login: the user owns their terminal, so programs that
		// reopen it by name (ttyname) can.
		_ = unix.Fchown(slave, int(sp.cred.Uid), -1)
	}
	input, err := dupFile(master)
	if err != nil {
		return nil, fmt.Errorf("duplicate pty: %w", err)
	}
	attr := &syscall.ProcAttr{
		Dir:   sp.dir,
		Env:   sp.env,
		Files: []uintptr{uintptr(slave), uintptr(slave), uintptr(slave)},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Credential: sp.cred},
	}
	pid, status, err := s.reaper.Start(func() (int, error) {
		return syscall.ForkExec(sp.path, sp.argv, attr)
	})
	if err != nil {
		input.Close()
		return nil, fmt.Errorf("start %s: %w", sp.argv[0], err)
	}
	return &running{pid: pid, status: status, stdin: input, stdout: master, sp: sp}, nil
}

// dupFile opens a second close-on-exec handle on f's open file (sharing its
// non-blocking mode, so it is pollable too).
func dupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var derr error
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}
