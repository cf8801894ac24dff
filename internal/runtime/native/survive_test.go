package native

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

// Environment of the fake daemon TestMain turns this binary into.
const (
	envDaemonSpec     = "WARREN_NATIVE_TEST_DAEMON_SPEC"
	envDaemonStateDir = "WARREN_NATIVE_TEST_DAEMON_STATEDIR"
	envDaemonCgroup   = "WARREN_NATIVE_TEST_DAEMON_CGROUP"
)

// fakeDaemon starts the sandbox described in the environment, prints its
// status as one JSON line and waits to be killed.
func fakeDaemon() {
	var spec runtime.Spec
	if err := json.Unmarshal([]byte(os.Getenv(envDaemonSpec)), &spec); err != nil {
		fmt.Println(`{"error":"bad spec"}`)
		os.Exit(1)
	}
	r, err := New(Options{StateDir: os.Getenv(envDaemonStateDir), CgroupParent: os.Getenv(envDaemonCgroup)})
	if err != nil {
		fmt.Printf("%q\n", err.Error())
		os.Exit(1)
	}
	st, err := r.Start(context.Background(), spec)
	if err != nil {
		fmt.Printf("%q\n", err.Error())
		os.Exit(1)
	}
	out, _ := json.Marshal(st)
	fmt.Println(string(out))
	select {}
}

// A sandbox outlives the daemon that started it being SIGKILLed, and a new
// Runtime recovers it.
func TestSandboxSurvivesDaemonKill(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)
	spec, results := runtimetest.NewSpec(t, runtimetest.BusyboxRootfs(t), runtimetest.ShellInit(
		`(i=0; while :; do i=$((i+1)); echo $i > /results/tick.tmp; mv /results/tick.tmp /results/tick; sleep 0.05; done) &`))
	t.Cleanup(func() { _ = r.Destroy(context.Background(), spec.ID) })
	specJSON, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}

	daemon := exec.Command("/proc/self/exe", "-test.run=^$")
	daemon.Env = append(os.Environ(),
		envDaemonSpec+"="+string(specJSON),
		envDaemonStateDir+"="+r.stateDir,
		envDaemonCgroup+"="+r.cgroupParent)
	daemon.Stderr = os.Stderr
	stdout, err := daemon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = daemon.Process.Kill()
			_ = daemon.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		t.Fatalf("fake daemon said nothing: %v", err)
	}
	var started runtime.Status
	if err := json.Unmarshal(line, &started); err != nil || started.State != runtime.StateRunning {
		t.Fatalf("fake daemon: %s", line)
	}

	if err := daemon.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = daemon.Wait()
	killed = true

	st, err := r.Recover(context.Background(), spec.ID)
	if err != nil {
		t.Fatalf("Recover after daemon kill: %v", err)
	}
	if st.State != runtime.StateRunning || st.InitPID != started.InitPID {
		t.Fatalf("Recover = %+v; want running with pid %d", st, started.InitPID)
	}
	// Still making progress with its parent gone.
	first := readTick(results)
	deadline := time.Now().Add(5 * time.Second)
	for readTick(results) == first {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox stopped ticking after the daemon was killed (tick %q)", first)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.Destroy(context.Background(), spec.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
}

func readTick(dir string) string {
	data, _ := os.ReadFile(dir + "/tick")
	return string(data)
}

// A state directory without state (a Start cut short by a crash) is listed,
// and Destroy removes it.
func TestDestroyHalfMadeSandbox(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)
	id := "halfmade" + fmt.Sprint(time.Now().UnixNano()%100000)
	if err := os.Mkdir(r.stateDir+"/"+id, 0o711); err != nil {
		t.Fatal(err)
	}
	list, _ := r.List(context.Background())
	found := false
	for _, l := range list {
		found = found || l == id
	}
	if !found {
		t.Fatalf("List() = %v; want it to include the half-made %s", list, id)
	}
	if err := r.Destroy(context.Background(), id); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if _, err := os.Stat(r.stateDir + "/" + id); !os.IsNotExist(err) {
		t.Errorf("state dir still there: %v", err)
	}
}
