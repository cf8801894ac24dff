package btrfs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

const loopMajor = 7

// attachLoop binds image to a free loop device and returns the device, open.
// The device is set to clear itself when its last user goes away
// (LO_FLAGS_AUTOCLEAR): once the caller has mounted it and closed the file,
// unmounting the pool is all it takes to free the device, and a failed mount
// frees it as soon as the file is closed. Direct I/O keeps the image's pages
// out of the host page cache (they would be cached twice otherwise).
func attachLoop(image string, log *slog.Logger) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/loop-control (is the loop module loaded, and are we root?): %w", errdefs.ErrUnavailable)
	}
	defer ctl.Close()
	img, err := os.OpenFile(image, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open pool image: %w", err)
	}
	defer img.Close()

	flags := uint32(unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO)
	var lastErr error
	// Another process may take the free device between GET_FREE and
	// CONFIGURE (EBUSY): ask again.
	for range 16 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev, err := openLoopDevice(n)
		if err != nil {
			return nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Size: 4096}
		cfg.Info.Flags = flags
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], image)
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		lastErr = err
		switch {
		case errors.Is(err, unix.EBUSY):
			continue
		case errors.Is(err, unix.EINVAL) && flags&unix.LO_FLAGS_DIRECT_IO != 0:
			// The image's filesystem cannot do direct I/O (tmpfs, say):
			// buffered I/O works, only slower on memory.
			log.Warn("loop device refused direct I/O; using buffered I/O", "image", image, "err", err)
			flags &^= unix.LO_FLAGS_DIRECT_IO
			continue
		default:
			return nil, fmt.Errorf("attach %s to /dev/loop%d: %w", image, n, err)
		}
	}
	return nil, fmt.Errorf("attach %s to a loop device: every free device was taken first: %w: %w", image, errdefs.ErrUnavailable, lastErr)
}

// openLoopDevice opens /dev/loopN, making the node if /dev is not a
// devtmpfs that made it already (some container setups).
func openLoopDevice(n int) (*os.File, error) {
	p := fmt.Sprintf("/dev/loop%d", n)
	f, err := os.OpenFile(p, os.O_RDWR|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		if err := unix.Mknod(p, unix.S_IFBLK|0o660, int(unix.Mkdev(loopMajor, uint32(n)))); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("make %s: %w", p, err)
		}
		f, err = os.OpenFile(p, os.O_RDWR|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	return f, nil
}

// waitLoopFree waits (briefly) until the loop device dev has dropped its
// backing file, which autoclear does once the last unmount is through.
func waitLoopFree(dev string) bool {
	name := strings.TrimPrefix(dev, "/dev/")
	backing := "/sys/block/" + name + "/loop/backing_file"
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(backing); errors.Is(err, os.ErrNotExist) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
