// A process in a new user namespace, made only so that its namespace can
// be opened: an idmapped mount takes a user namespace fd for its mapping,
// and the sandbox's own namespace does not exist yet when its root is
// mounted. In C because the child of a raw clone from a multi-threaded Go
// process may only make async-signal-safe calls.
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

// The child shares the daemon's memory (CLONE_VM: no copy of a large
// process's page tables) and so runs on a stack of its own; it only makes
// raw system calls on it.
#define USERNS_STACK (64 * 1024)

static int userns_child(void *arg) {
	(void)arg;
	syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	for (;;)
		syscall(SYS_pause);
	return 0;
}

// warren_userns_spawn clones a child into a new user namespace. The child
// waits for a signal; the caller writes its id maps, opens
// /proc/<pid>/ns/user, kills it, reaps it and then frees *stack. Should
// the caller die first, the child gets SIGKILL too. Returns the child's
// pid, or -1 with errno set.
int warren_userns_spawn(void **stack) {
	*stack = malloc(USERNS_STACK);
	if (*stack == NULL)
		return -1;
	int pid = clone(userns_child, (char *)*stack + USERNS_STACK, CLONE_NEWUSER | CLONE_VM | SIGCHLD, NULL);
	if (pid < 0) {
		free(*stack);
		*stack = NULL;
	}
	return pid;
}
