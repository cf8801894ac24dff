package treediff

import "testing"

func TestDisplayPath(t *testing.T) {
	for in, want := range map[string]string{
		"/workspace/a.txt":        "/workspace/a.txt",
		"/workspace/with space":   "/workspace/with space",
		"/workspace/café":         "/workspace/café",
		"/workspace/x\nA  /etc/y": `"/workspace/x\nA  /etc/y"`,
		"/workspace/\x1b[31mred":  `"/workspace/\x1b[31mred"`,
		"/workspace/q\"uote":      `"/workspace/q\"uote"`,
		"/workspace/back\\slash":  `"/workspace/back\\slash"`,
		"/workspace/bad\xffutf8":  `"/workspace/bad\xffutf8"`,
	} {
		if got := DisplayPath(in); got != want {
			t.Errorf("DisplayPath(%q) = %s, want %s", in, got, want)
		}
	}
}
