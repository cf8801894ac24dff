// A process in a new user namespace, made only so that its namespace can
// be opened: an idmapped mount takes a user namespace fd for its mapping,
// and the sandbox's own namespace does not exist yet when its root is
// mounted. In C because the child of a raw clone from a multi-threaded Go
// process may only make async-signal-safe calls.
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

// warren_userns_spawn clones a child into a new user namespace. The child
// waits for a signal; the caller writes its id maps, opens
// /proc/<pid>/ns/user, then kills it. Should the caller die first, the
// child gets SIGKILL too. Returns the child's pid, or -1 with errno set.
int warren_userns_spawn(void) {
	long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	if (pid == 0) {
		syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		for (;;)
			pause();
	}
	return (int)pid;
}
