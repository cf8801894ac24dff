package runtimetest

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// bootIDScript records the sandbox's boot id, tries to overwrite it, and
// records it again once the test touches /results/again.
const bootIDScript = `f=/proc/sys/kernel/random/boot_id
cat $f > /results/b1 && mv /results/b1 /results/boot1
if (echo 00000000-0000-4000-8000-000000000000 > $f) 2>/results/write.err; then echo written > /results/write; fi
while [ ! -e /results/again ]; do sleep 0.05; done
cat $f > /results/b2 && mv /results/b2 /results/boot2`

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// bootID: every start is a boot of its own. A sandbox's boot id is a
// UUID that is not the host's nor another sandbox's, cannot be written
// from inside, and stays the same across a pause and resume.
func (s *suite) bootID(t *testing.T) {
	rt := s.newRuntime(t)
	a := RunScript(t, rt, s.rootfs(t), bootIDScript, nil)
	b := RunScript(t, rt, s.rootfs(t), bootIDScript, nil)
	a.WaitFile(t, "boot1", scriptTimeout)
	b.WaitFile(t, "boot1", scriptTimeout)
	host, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	idA, idB := a.Read("boot1"), b.Read("boot1")
	if !uuidRE.MatchString(idA) || !uuidRE.MatchString(idB) {
		t.Fatalf("boot ids %q and %q; want version 4 UUIDs", idA, idB)
	}
	if idA == strings.TrimSpace(string(host)) {
		t.Errorf("the sandbox's boot id is the host's (%s)", idA)
	}
	if idA == idB {
		t.Errorf("two sandboxes share boot id %s", idA)
	}
	if rt.Capabilities().Pause {
		if err := rt.Pause(bg, a.Spec.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if err := rt.Resume(bg, a.Spec.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(a.Results+"/again", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a.WaitFile(t, "boot2", scriptTimeout)
	if got := a.Read("boot2"); got != idA {
		t.Errorf("boot id after a pause and resume = %q; want %q", got, idA)
	}
	if a.Read("write") != "" {
		t.Errorf("the sandbox's root overwrote its boot id")
	}
	t.Logf("write refused: %s", a.Read("write.err"))
}
