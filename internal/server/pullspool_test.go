package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/snapbundle"
)

// A spool cut mid-frame is continued from its last whole frame, with the
// base its bundle's header names; one without even a whole header is not.
func TestOpenSpoolCutsToTheLastFrame(t *testing.T) {
	var whole bytes.Buffer
	w, err := snapbundle.NewWriter(&whole, snapbundle.Header{Format: snapbundle.FormatBtrfs, Base: "parent1", Snapshot: snapbundle.Record{ID: "snap1"}})
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 3<<20+5000)
	rand.Read(body)
	w.Write(body)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "admin.snap1.0123abcd.part")
	cut := whole.Len() / 2 // inside the second of four frames
	if err := os.WriteFile(path, whole.Bytes()[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	sp, base, err := openSpool(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.f.Close()
	if base != "parent1" || sp.identity != "0123abcd" {
		t.Errorf("base %q identity %q", base, sp.identity)
	}
	if sp.size >= int64(cut) || sp.size < int64(cut)-(1<<20)-4 {
		t.Errorf("resume at %d of a spool cut at %d", sp.size, cut)
	}
	if st, _ := os.Stat(path); st.Size() != sp.size {
		t.Errorf("spool is %d bytes, resume offset %d", st.Size(), sp.size)
	}
	// What the peer sends from that offset completes the bundle.
	var rest bytes.Buffer
	w2, _ := snapbundle.NewWriterAt(&rest, snapbundle.Header{Format: snapbundle.FormatBtrfs, Base: "parent1", Snapshot: snapbundle.Record{ID: "snap1"}}, sp.size)
	w2.Write(body)
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	head, _ := os.ReadFile(path)
	if !bytes.Equal(append(head, rest.Bytes()...), whole.Bytes()) {
		t.Error("spool + resumed part differ from the whole bundle")
	}

	short := filepath.Join(dir, "admin.snap2.x.part")
	os.WriteFile(short, whole.Bytes()[:10], 0o600)
	if _, _, err := openSpool(short); err == nil {
		t.Error("a spool without a whole header was continued")
	}
}

func TestPullRequestValidate(t *testing.T) {
	good := pullRequest{From: "http://127.0.0.1:7000", Snapshot: "snap1", Team: "team-a"}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []pullRequest{
		{From: "127.0.0.1:7000", Snapshot: "snap1", Team: "t"},
		{From: "ftp://h", Snapshot: "snap1", Team: "t"},
		{From: "http://h", Snapshot: "../x", Team: "t"},
		{From: "http://h", Snapshot: "snap1", Team: ""},
	} {
		if err := bad.validate(); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}

// Outside node mode there is no fleet key to pull with: 501, saying so.
func TestPullOutsideNodeMode(t *testing.T) {
	s := &snapshotRoutes{pull: &puller{}}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/snapshots/pull", strings.NewReader(`{"from":"http://h:1","snapshot":"s","team":"t"}`))
	s.pullSnapshot(rec, req)
	if rec.Code != http.StatusNotImplemented || !strings.Contains(rec.Body.String(), "--cluster kubernetes") {
		t.Errorf("pull outside node mode: %d %s", rec.Code, rec.Body)
	}
}

// Two pulls of one snapshot would write one spool: the second waits.
func TestPullsOfOneSnapshotTakeTurns(t *testing.T) {
	p := &puller{}
	done, err := p.one(context.Background(), "t/s")
	if err != nil {
		t.Fatal(err)
	}
	other, err := p.one(context.Background(), "t/other")
	if err != nil {
		t.Fatal(err)
	}
	other()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.one(ctx, "t/s"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second pull of a running one: %v, want it to wait", err)
	}
	got := make(chan error)
	go func() {
		d, err := p.one(context.Background(), "t/s")
		if err == nil {
			d()
		}
		got <- err
	}()
	done()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
