package tplbuild

import (
	"strings"
	"testing"
)

// A finished build's log outlives the server: a new service (a restart)
// reads it back, the failure's lines with it, and a huge log is cut to
// the bound.
func TestBuildLogKeptOnDisk(t *testing.T) {
	dir := t.TempDir()
	s := New(Config{Dir: dir})
	l := &buildLog{}
	l.add("info", "1", "step %d", 1)
	l.failure = l.output("error", "1", "boom\n")
	s.saveLog("b1", l)

	got := New(Config{Dir: dir}).loadLog("b1")
	if got == nil || len(got.entries) != 2 || got.entries[1].Message != "boom" || len(got.failure) != 1 {
		t.Fatalf("loaded log = %+v", got)
	}
	if New(Config{Dir: dir}).loadLog("none") != nil || s.loadLog("../x") != nil {
		t.Fatal("a build without a log file (or a bad id) must load none")
	}

	big := &buildLog{}
	line := strings.Repeat("x", 1000)
	for range 10000 {
		big.add("info", "1", "%s", line)
	}
	s.saveLog("b2", big)
	if n := len(s.loadLog("b2").entries); n == 0 || n*1000 > maxLogFileBytes {
		t.Fatalf("kept %d entries of 1000 bytes, bound %d bytes", n, maxLogFileBytes)
	}
}
