package sandboxlog

import (
	"bytes"
	"context"
	"testing"
	"unicode/utf8"

	"github.com/warrenhq/warren/internal/procs"
)

// FuzzOutput writes arbitrary output in arbitrary chunks, with replays:
// the log must keep every line once, in order, numbered without gaps.
func FuzzOutput(f *testing.F) {
	f.Add([]byte("a\nb\r\nc"), uint8(2), uint8(1))
	f.Add(bytes.Repeat([]byte("x"), 3*MaxLine+7), uint8(200), uint8(0))
	f.Add([]byte("\n\n\xff\xfe\n"), uint8(1), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, chunk, replay uint8) {
		l := New(Options{Dir: t.TempDir()})
		defer l.Close() // thousands of iterations must not run out of fds
		p := procs.ProcessID{PID: 3, Seq: 1}
		step := int(chunk)%64 + 1
		for off := 0; off < len(data); off += step {
			end := min(off+step, len(data))
			l.Output(sb, p, false, uint64(off), data[off:end])
			if replay > 0 && off >= int(replay) {
				// The agent sends an older range again: nothing new.
				from := off - int(replay)
				l.Output(sb, p, false, uint64(from), data[from:end])
			}
		}
		l.Exited(sb, p, procs.Exit{})
		page, err := l.Read(context.Background(), sb, Query{})
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for i, e := range page.Entries {
			if e.Seq != int64(i+1) {
				t.Fatalf("entry %d has seq %d", i, e.Seq)
			}
			if e.Source == SourceStdout {
				got = append(got, e.Message...)
			}
		}
		// Lines lose their newlines (and a CR before one); each line is
		// logged on its own, so invalid UTF-8 in one is replaced (even when
		// the next line's bytes would complete its last rune), and a line
		// longer than MaxLine is cut in pieces that may split a rune.
		// Compare exactly when every line survives whole.
		lines := bytes.Split(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\n"))
		comparable := true
		for _, line := range lines {
			if !utf8.Valid(line) || len(line) > MaxLine && !isASCII(line) {
				comparable = false
			}
		}
		want := bytes.Join(lines, nil)
		if !comparable {
			return
		}
		if len(got) == 0 && len(want) > 0 {
			t.Fatalf("nothing logged of %q", data)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("logged %q, want %q", got, want)
		}
	})
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
