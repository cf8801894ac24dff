package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseCPUStat(t *testing.T) {
	got, err := parseCPUStat(strings.NewReader("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n"))
	if err != nil || got != 1500*time.Microsecond {
		t.Fatalf("parseCPUStat = %v, %v; want 1.5ms", got, err)
	}
	if _, err := parseCPUStat(strings.NewReader("user_usec 1\n")); err == nil {
		t.Fatal("a cpu.stat without usage_usec parsed")
	}
}

func TestOwnCgroup(t *testing.T) {
	hybrid := "4:memory:/a\n3:cpu,cpuacct:/b/c\n0::/d\n"
	for _, tc := range []struct{ controller, want string }{{"cpuacct", "/b/c"}, {"memory", "/a"}, {"", "/d"}} {
		if got, ok := ownCgroup(hybrid, tc.controller); !ok || got != tc.want {
			t.Errorf("ownCgroup(%q) = %q, %v; want %q", tc.controller, got, ok, tc.want)
		}
	}
	if _, ok := ownCgroup("1:name=systemd:/\n", "cpuacct"); ok {
		t.Error("found cpuacct where there is none")
	}
}

func TestPerCreate(t *testing.T) {
	b := cpuSample{total: time.Second, self: 100 * time.Millisecond}
	a := cpuSample{total: time.Second + 300*time.Millisecond, self: 200 * time.Millisecond}
	total, daemon, sandbox := perCreate(b, a, 10)
	if total != 30 || daemon != 10 || sandbox != 20 {
		t.Fatalf("perCreate = %v, %v, %v; want 30, 10, 20", total, daemon, sandbox)
	}
}
