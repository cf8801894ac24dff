package tools

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/agenttest"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

// BenchmarkGrep100k greps a tree of 100,000 small source-like files (100 ×
// 10 directories of 100 files, 1.2 KB each; 1 in 1000 holds the needle),
// against GNU grep -rn on the same tree for comparison.
//
//	cd agent && CGO_ENABLED=0 go test -run '^$' -bench Grep100k ./internal/tools/
func BenchmarkGrep100k(b *testing.B) {
	root := b.TempDir()
	makeTree(b, root)
	// Write the tree back and read it once, so the first case measured does
	// not pay for the writeback of the files just made.
	syscall.Sync()
	e := newEnv(b)
	e.run(b, "grep", map[string]any{"pattern": "warm-up", "path": root})
	for _, bc := range []struct {
		name   string
		params map[string]any
		gnu    []string
	}{
		{"literal", map[string]any{"pattern": "needle_4711", "path": root}, []string{"-rn", "needle_4711", root}},
		{"regex", map[string]any{"pattern": `func \w+_4711\(`, "path": root}, []string{"-rnE", `func \w+_4711\(`, root}},
		{"ignoreCase", map[string]any{"pattern": "NEEDLE_4711", "path": root, "ignoreCase": true}, []string{"-rni", "NEEDLE_4711", root}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				r := e.run(b, "grep", bc.params)
				if !strings.Contains(r.Content, "100 matching lines in 100 files") {
					b.Fatalf("unexpected answer: %.300s", r.Content)
				}
			}
		})
		b.Run(bc.name+"/gnu-grep", func(b *testing.B) {
			if _, err := exec.LookPath("grep"); err != nil {
				b.Skip("no grep")
			}
			for b.Loop() {
				out, err := exec.Command("grep", bc.gnu...).Output()
				if err != nil || strings.Count(string(out), "\n") != 100 {
					b.Fatalf("gnu grep: %v, %d lines", err, strings.Count(string(out), "\n"))
				}
			}
		})
	}
}

func makeTree(b testing.TB, root string) {
	b.Helper()
	var body strings.Builder
	for i := range 30 {
		fmt.Fprintf(&body, "func helper%d(x int) int { return x * %d } // filler text\n", i, i)
	}
	filler := body.String()
	n := 0
	for d := range 100 {
		for s := range 10 {
			dir := filepath.Join(root, fmt.Sprintf("pkg%03d", d), fmt.Sprintf("sub%d", s))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for f := range 100 {
				fh, err := os.Create(filepath.Join(dir, fmt.Sprintf("file%03d.go", f)))
				if err != nil {
					b.Fatal(err)
				}
				w := bufio.NewWriter(fh)
				w.WriteString("package p\n\n")
				w.WriteString(filler)
				if n%1000 == 0 {
					w.WriteString("func needle_4711() {}\n")
				}
				if err := w.Flush(); err != nil {
					b.Fatal(err)
				}
				fh.Close()
				n++
			}
		}
	}
}

// BenchmarkCall measures the agent's share of a tool round trip: read of a
// 4 KiB file and an edit, each a Connect call over loopback HTTP/2.
func BenchmarkCall(b *testing.B) {
	e := newEnv(b)
	mux := http.NewServeMux()
	e.s.Handle(mux)
	hc, url := agenttest.Serve(b, mux)
	c := agentv1connect.NewToolsServiceClient(hc, url)
	writeFile(b, e.home, "4k.txt", strings.Repeat("0123456789abcde\n", 128)+"marker A\n"+strings.Repeat("0123456789abcde\n", 127))
	call := func(b *testing.B, tool, params string) {
		st, err := c.Call(context.Background(), connect.NewRequest(&agentv1.CallRequest{Tool: tool, Params: []byte(params)}))
		if err != nil {
			b.Fatal(err)
		}
		var res *agentv1.ToolResult
		for st.Receive() {
			res = st.Msg().GetResult()
		}
		if st.Err() != nil || res == nil || res.IsError {
			b.Fatalf("%s: %v %v", tool, st.Err(), res)
		}
		st.Close()
	}
	b.Run("read4KiB", func(b *testing.B) {
		for b.Loop() {
			call(b, "read", `{"path":"4k.txt"}`)
		}
	})
	b.Run("edit", func(b *testing.B) {
		i := 0
		for b.Loop() {
			// Alternate so every edit finds its oldString.
			from, to := "marker A", "marker B"
			if i%2 == 1 {
				from, to = to, from
			}
			call(b, "edit", `{"path":"4k.txt","oldString":"`+from+`","newString":"`+to+`"}`)
			i++
		}
	})
}
