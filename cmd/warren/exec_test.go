package main

import (
	"reflect"
	"testing"

	"github.com/warrenhq/warren/client"
)

func TestSplitExecArgs(t *testing.T) {
	tests := []struct {
		argv    []string
		dash    int
		id      string
		words   []string
		wantErr bool
	}{
		{[]string{"sb", "ls", "/"}, -1, "sb", []string{"ls", "/"}, false},
		{[]string{"sb", "ls", "-la"}, 1, "sb", []string{"ls", "-la"}, false},
		{[]string{"sb", "x", "ls"}, 2, "", nil, true}, // extra word before --
		{[]string{"ls"}, 0, "", nil, true},            // no id before --
		{[]string{"sb"}, -1, "", nil, true},           // no command
		{[]string{"sb"}, 1, "", nil, true},
		{nil, -1, "", nil, true},
	}
	for _, tt := range tests {
		id, words, err := splitExecArgs(tt.argv, tt.dash)
		if (err != nil) != tt.wantErr || id != tt.id || !reflect.DeepEqual(words, tt.words) {
			t.Errorf("splitExecArgs(%q, %d) = %q, %q, %v", tt.argv, tt.dash, id, words, err)
		}
	}
}

func TestExecExitStatus(t *testing.T) {
	i32 := func(n int32) *int32 { return &n }
	tests := []struct {
		name     string
		st       execStatus
		code     int
		wantNote bool
	}{
		{"success", execStatus{exitCode: i32(0)}, 0, false},
		{"failure", execStatus{exitCode: i32(3)}, 3, false},
		{"large code", execStatus{exitCode: i32(256 + 7)}, 7, false},
		{"timed out", execStatus{exitCode: i32(-1), timedOut: true}, 124, true},
		{"signal name", execStatus{exitCode: i32(-1), signal: "SIGKILL"}, 137, true},
		{"signal short", execStatus{signal: "term"}, 143, true},
		{"signal number", execStatus{signal: "9"}, 137, true},
		{"unknown signal", execStatus{signal: "SIGWHAT"}, 128, true},
		{"could not start", execStatus{err: "exec: \"nope\": not found"}, 255, true},
		{"nothing", execStatus{}, 255, true},
		{"truncated", execStatus{exitCode: i32(0), truncated: true}, 0, true},
	}
	for _, tt := range tests {
		code, note := tt.st.exit()
		if code != tt.code || (note != "") != tt.wantNote {
			t.Errorf("%s: exit() = %d, %q", tt.name, code, note)
		}
	}
}

func TestResultStatus(t *testing.T) {
	if st := resultStatus(client.ExecResult{Error: "no such file"}); st.exitCode != nil {
		t.Errorf("a command that never ran got exit code %d", *st.exitCode)
	}
	if code, _ := resultStatus(client.ExecResult{ExitCode: 2}).exit(); code != 2 {
		t.Errorf("code = %d, want 2", code)
	}
}
