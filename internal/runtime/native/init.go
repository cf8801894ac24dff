package native

import (
	"os"
	goruntime "runtime"

	"github.com/opencontainers/runc/libcontainer"
	// nsenter's cgo constructor runs before the Go runtime starts when the
	// binary is re-executed as "init"; it joins or creates the namespaces.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// Init must be the first thing the host binary's main (and every test
// binary's TestMain that uses this package) calls. libcontainer starts a
// sandbox by re-executing /proc/self/exe with the argument "init"; in that
// child Init never returns (it becomes the sandbox's PID 1 via execve). In
// every other case it returns at once.
func Init() {
	if len(os.Args) <= 1 || os.Args[1] != "init" {
		return
	}
	// The namespace and credential changes libcontainer makes apply to one
	// OS thread; keep the Go runtime on it.
	goruntime.GOMAXPROCS(1)
	goruntime.LockOSThread()
	libcontainer.Init() // does not return
}
