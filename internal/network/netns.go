package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// onThread runs fn on a fresh goroutine locked to its OS thread. When fn
// leaves the thread in another namespace and restoring fails, the thread is
// not unlocked, so the Go runtime discards it instead of reusing it.
func onThread(fn func() (restored bool, err error)) error {
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		restored, err := fn()
		if restored {
			goruntime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// inNetNS runs fn with the calling thread in ns: sockets fn opens belong to
// ns, and /proc/sys/net is ns's.
func inNetNS(ns netns.NsHandle, fn func() error) error {
	return onThread(func() (bool, error) {
		orig, err := netns.Get()
		if err != nil {
			return true, fmt.Errorf("open current netns: %w", err)
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			return true, fmt.Errorf("enter netns: %w", err)
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			return false, errors.Join(ferr, fmt.Errorf("return to netns: %w", err))
		}
		return true, ferr
	})
}

// createNetNS makes a network namespace, bind-mounts it at path (which must
// not exist) and returns a handle to it. inside runs in the new namespace
// before the thread leaves it.
func createNetNS(path string, inside func() error) (netns.NsHandle, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return netns.None(), fmt.Errorf("create netns mount point: %w", err)
	}
	f.Close()
	ns := netns.None()
	err = onThread(func() (bool, error) {
		orig, err := netns.Get()
		if err != nil {
			return true, fmt.Errorf("open current netns: %w", err)
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return true, fmt.Errorf("unshare netns: %w", err)
		}
		ferr := func() error {
			if err := unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind-mount netns at %s: %w", path, err)
			}
			h, err := netns.Get()
			if err != nil {
				return fmt.Errorf("open new netns: %w", err)
			}
			ns = h
			if inside != nil {
				return inside()
			}
			return nil
		}()
		if err := netns.Set(orig); err != nil {
			return false, errors.Join(ferr, fmt.Errorf("return to netns: %w", err))
		}
		return true, ferr
	})
	if err != nil {
		if ns.IsOpen() {
			ns.Close()
		}
		removeNetNSMount(path)
		return netns.None(), err
	}
	return ns, nil
}

// removeNetNSMount unmounts and removes a netns mount point; a missing one is
// not an error. The namespace itself goes away with its last user.
func removeNetNSMount(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// makeSharedMountDir makes dir a mount point with shared propagation, as
// iproute2 does for /run/netns: a netns bind mount copied into a mount
// namespace created later (a container, a systemd service with PrivateTmp)
// is then unmounted there too when warren unmounts it, instead of keeping
// the namespace alive. It returns whether it mounted dir.
func makeSharedMountDir(dir string) (bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("create %s: %w", dir, err)
	}
	mounted := false
	for {
		err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == nil {
			return mounted, nil
		}
		if !errors.Is(err, unix.EINVAL) || mounted {
			return mounted, fmt.Errorf("make %s a shared mount: %w", dir, err)
		}
		if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return false, fmt.Errorf("bind-mount %s onto itself: %w", dir, err)
		}
		mounted = true
	}
}

// sysctl paths are resolved in the netns of the calling thread: call these
// inside inNetNS.
func readSysctl(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc/sys", name))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func writeSysctl(name, value string) error {
	return os.WriteFile(filepath.Join("/proc/sys", name), []byte(value), 0o644)
}
