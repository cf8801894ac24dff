// Command cutlink is run as root inside a sandbox by the e2e tests: it
// takes copies of PID 1's (the agent's) socket descriptors with
// pidfd_getfd and shuts each down, which cuts the agent's link to the
// daemon as surely as closing it would. It prints what it managed.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	entries, err := os.ReadDir("/proc/1/fd")
	if err != nil {
		fmt.Println("refused: list /proc/1/fd:", err)
		return
	}
	pidfd, err := unix.PidfdOpen(1, 0)
	if err != nil {
		fmt.Println("refused: pidfd_open:", err)
		return
	}
	cut := 0
	for _, e := range entries {
		target, err := os.Readlink("/proc/1/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(target, "socket:") {
			continue
		}
		n, _ := strconv.Atoi(e.Name())
		fd, err := unix.PidfdGetfd(pidfd, n, 0)
		if err != nil {
			fmt.Printf("refused: pidfd_getfd %d: %v\n", n, err)
			continue
		}
		if err := unix.Shutdown(fd, unix.SHUT_RDWR); err == nil {
			cut++
		}
		unix.Close(fd)
	}
	fmt.Printf("cut %d\n", cut)
}
