package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/snapbundle"
	"github.com/warrenhq/warren/internal/store"
)

// heldSnapshots holds the snapshots named, ready.
type heldSnapshots struct {
	Snapshots
	held map[string]bool
}

func (h heldSnapshots) GetSnapshot(_ context.Context, _, id string) (store.Snapshot, error) {
	if !h.held[id] {
		return store.Snapshot{}, errdefs.ErrNotFound
	}
	return store.Snapshot{ID: id, State: session.SnapReady}, nil
}

// deltaPeer answers exports as a peer of the given format does: a dir
// (tar) peer, or a refusing one, answers a delta with 501. It notes each
// query's base ("" whole, "head" for the header alone).
type deltaPeer struct {
	hdrFormat string // the format its bundle header names
	refuse    bool   // answer 501 to ?base=
	mu        sync.Mutex
	asked     []string
}

func (d *deltaPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d.mu.Lock()
	if q.Get("head") == "true" {
		d.asked = append(d.asked, "head")
	} else {
		d.asked = append(d.asked, q.Get("base"))
	}
	d.mu.Unlock()
	if q.Get("base") != "" && d.refuse {
		w.WriteHeader(http.StatusNotImplemented)
		fmt.Fprint(w, `{"message":"this daemon's storage exports whole snapshots only (a tar); export without base"}`)
		return
	}
	w.Header().Set(headerBundleIdentity, "id"+q.Get("base"))
	bw, _ := snapbundle.NewWriter(w, snapbundle.Header{Format: d.hdrFormat, Base: q.Get("base"),
		Snapshot: snapbundle.Record{ID: "child", Lineage: []string{"parent"}}})
	if q.Get("head") != "true" {
		bw.Write([]byte("files"))
	}
	bw.Close()
}

func (d *deltaPeer) queries() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.asked, ",")
}

// A pull from a peer that holds a parent this node holds too asks for a
// delta, unless the peer's bundles are tar (dir storage, whole only); a
// peer that refuses the delta anyway (501) is asked for the whole bundle.
func TestPullFallsBackToWholeBundle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		peer   *deltaPeer
		asked  string // the peer's queries, in order
		bundle string // the base of the bundle the pull spools
	}{
		{"btrfs peer sends a delta", &deltaPeer{hdrFormat: snapbundle.FormatBtrfs}, "head,parent", "parent"},
		{"dir peer is asked whole", &deltaPeer{hdrFormat: snapbundle.FormatTar}, "head,", ""},
		{"501 to a delta", &deltaPeer{hdrFormat: snapbundle.FormatBtrfs, refuse: true}, "head,parent,", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.peer)
			defer srv.Close()
			p := &puller{PullConfig: PullConfig{SpoolDir: t.TempDir()}, http: srv.Client(), log: slog.Default(),
				snapshots: heldSnapshots{held: map[string]bool{"parent": true}}}
			req := pullRequest{From: srv.URL, Snapshot: "child", Team: "t"}
			sp, res, err := p.start(context.Background(), req, "key")
			if err != nil {
				t.Fatal(err)
			}
			defer sp.f.Close()
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			br, err := snapbundle.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.peer.queries(); got != tc.asked {
				t.Errorf("peer asked %q, want %q", got, tc.asked)
			}
			if br.Header.Base != tc.bundle {
				t.Errorf("bundle base %q, want %q", br.Header.Base, tc.bundle)
			}
		})
	}
}

// A refused delta is asked again whole, unless the pull was given up.
func TestWholeAfterDelta(t *testing.T) {
	refused := fmt.Errorf("peer answered 501: %w", errdefs.ErrUnsupported)
	if !wholeAfterDelta(context.Background(), refused) {
		t.Error("a 501 to a delta is not asked again whole")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if wholeAfterDelta(ctx, fmt.Errorf("export: %w", context.Canceled)) {
		t.Error("a cancelled pull is asked again whole")
	}
	if !wholeAfterDelta(context.Background(), errors.New("base gone")) {
		t.Error("a delta whose base the peer lost is not asked again whole")
	}
}
