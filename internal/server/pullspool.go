package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/snapbundle"
	"github.com/warrenhq/warren/internal/store"
)

// spool is the file a pull keeps the bytes it received in: named by the
// team, the snapshot and the bundle's identity, so a retry finds it and
// the peer can tell whether an offset into it still means its bundle.
type spool struct {
	path     string
	f        *os.File
	identity string
	size     int64 // bytes in the file before this pull's stream
}

func (p *puller) spoolPath(req pullRequest, identity string) string {
	return filepath.Join(p.SpoolDir, req.Team+"."+req.Snapshot+"."+identity+".part")
}

// resume continues a broken earlier pull of req's snapshot: it answers the
// spool and the peer's answer from the spool's last frame boundary on, or
// no answer when there is nothing to resume (or the peer's bundle is no
// longer the one spooled, whose bytes are then dropped).
func (p *puller) resume(ctx context.Context, req pullRequest, key string) (*spool, *http.Response, error) {
	found, _ := filepath.Glob(p.spoolPath(req, "*"))
	for _, path := range found[min(len(found), 1):] {
		os.Remove(path) // only one can be continued; keep the first
	}
	if len(found) == 0 {
		return nil, nil, nil
	}
	path := found[0]
	sp, base, err := openSpool(path)
	if err != nil {
		p.log.Warn("drop a pull's spool that cannot be continued", "path", path, "err", err)
		os.Remove(path)
		return nil, nil, nil
	}
	res, err := p.export(ctx, req, key, base, sp.size, sp.identity)
	switch {
	case errors.Is(err, errdefs.ErrConflict) || errors.Is(err, errdefs.ErrInvalid) || errors.Is(err, errdefs.ErrNotFound) ||
		errors.Is(err, errdefs.ErrUnsupported):
		// The peer's bundle changed (or its base went, or it now sends
		// no deltas: dir storage answers 501): start again.
		sp.f.Close()
		os.Remove(path)
		return nil, nil, nil
	case err != nil:
		sp.f.Close()
		return nil, nil, err
	}
	p.log.Info("resume a snapshot pull", "snapshot", req.Snapshot, "from", req.From, "offset", sp.size)
	return sp, res, nil
}

// openSpool opens a spool, cuts it to its last frame boundary and reads
// the base its bundle is a delta against.
func openSpool(path string) (*spool, string, error) {
	name := strings.TrimSuffix(filepath.Base(path), ".part")
	identity := name[strings.LastIndexByte(name, '.')+1:]
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, "", err
	}
	base, at, err := spooledBundle(f)
	if err != nil {
		f.Close()
		return nil, "", err
	}
	return &spool{path: path, f: f, identity: identity, size: at}, base, nil
}

// spooledBundle cuts a spool to its last frame boundary and reads the base
// of the bundle in it.
func spooledBundle(f *os.File) (base string, at int64, err error) {
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if at, err = snapbundle.Boundary(f, st.Size()); err != nil {
		return "", 0, err
	}
	if at == 0 {
		return "", 0, errors.New("not even the bundle's header was received")
	}
	if err := f.Truncate(at); err != nil {
		return "", 0, err
	}
	br, err := snapbundle.NewReader(io.NewSectionReader(f, 0, at))
	if err != nil {
		return "", 0, err
	}
	return br.Header.Base, at, nil
}

// start begins a pull afresh: the peer's whole bundle, or, when this node
// holds one of the snapshot's ancestors (the bundle's header, asked for
// first, lists them), a delta against the nearest.
func (p *puller) start(ctx context.Context, req pullRequest, key string) (*spool, *http.Response, error) {
	head, err := p.exportQuery(ctx, req, key, "", 0, "", true)
	if err != nil {
		return nil, nil, err
	}
	br, err := snapbundle.NewReader(head.Body)
	head.Body.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("the bundle header from peer %s: %w", req.From, err)
	}
	if base := p.deltaBase(ctx, req.Team, br.Header); base != "" {
		res, err := p.export(ctx, req, key, base, 0, "")
		if err == nil {
			return p.newSpool(req, res)
		}
		if !wholeAfterDelta(ctx, err) {
			return nil, nil, err
		}
		p.log.Info("take a whole bundle: the peer sends no delta", "snapshot", req.Snapshot, "from", req.From, "base", base, "err", err)
	}
	res, err := p.export(ctx, req, key, "", 0, "")
	if err != nil {
		return nil, nil, err
	}
	return p.newSpool(req, res)
}

// deltaBase is the snapshot to ask the peer for a delta against, given
// its bundle's header: the nearest ancestor held here, or "" for a whole
// bundle. A peer on dir storage (format tar) exports whole snapshots only
// and refuses a delta with 501, so it is not asked for one.
func (p *puller) deltaBase(ctx context.Context, team string, hdr snapbundle.Header) string {
	if hdr.Format == snapbundle.FormatTar {
		return ""
	}
	return p.nearestHeld(ctx, team, hdr.Snapshot.Lineage)
}

// wholeAfterDelta says whether a refused delta export is worth asking
// again whole: yes unless the pull itself was given up. A peer that
// cannot send deltas (501: dir storage, perhaps of a different version
// than its header said) or no longer holds the base still sends the whole
// snapshot.
func wholeAfterDelta(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// nearestHeld is the first of lineage (nearest first) this node holds for
// team.
func (p *puller) nearestHeld(ctx context.Context, team string, lineage []string) string {
	for _, id := range lineage {
		if s, err := p.snapshots.GetSnapshot(ctx, team, id); err == nil && usableHere(s) {
			return id
		}
	}
	return ""
}

// newSpool makes the spool of an export's answer.
func (p *puller) newSpool(req pullRequest, res *http.Response) (*spool, *http.Response, error) {
	identity := res.Header.Get(headerBundleIdentity)
	if identity == "" || strings.ContainsAny(identity, "./") {
		identity = "unnamed" // an older peer: the pull cannot resume
	}
	if err := os.MkdirAll(p.SpoolDir, 0o700); err != nil {
		res.Body.Close()
		return nil, nil, fmt.Errorf("make the pull spool directory: %w", err)
	}
	path := p.spoolPath(req, identity)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		res.Body.Close()
		return nil, nil, fmt.Errorf("make the pull spool: %w", err)
	}
	return &spool{path: path, f: f, identity: identity}, res, nil
}

// cutReader notes a read error of the peer's stream: the pull then keeps
// its spool for a retry.
type cutReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *cutReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// importSpooled imports the bundle that is the spool's bytes then the
// peer's stream, writing the stream to the spool as it is read. The spool
// goes once the import ends, unless the stream broke.
func (p *puller) importSpooled(ctx context.Context, req pullRequest, sp *spool, stream io.Reader) (store.Snapshot, bool, error) {
	live := &cutReader{r: stream}
	prefix := io.NewSectionReader(sp.f, 0, sp.size)
	body := io.MultiReader(prefix, io.TeeReader(live, appendTo{sp.f}))
	snap, created, err := p.importBundle(ctx, req, body)
	sp.f.Close()
	if err != nil && live.err != nil && ctx.Err() == nil {
		got := sp.size + live.n
		return store.Snapshot{}, false, fmt.Errorf("the stream from peer %s broke after %d bytes (%v); pull again to continue from there: %w",
			req.From, got, live.err, errdefs.ErrUnavailable)
	}
	if err != nil && ctx.Err() != nil {
		return store.Snapshot{}, false, fmt.Errorf("pull of snapshot %s cut short (%v); pull again to continue: %w", req.Snapshot, err, errdefs.ErrUnavailable)
	}
	os.Remove(sp.path)
	return snap, created, err
}

// appendTo writes at the end of a file whatever was read before.
type appendTo struct{ f *os.File }

func (a appendTo) Write(b []byte) (int, error) {
	if _, err := a.f.Seek(0, io.SeekEnd); err != nil {
		return 0, err
	}
	return a.f.Write(b)
}

// importBundle imports a bundle as the team's snapshot.
func (p *puller) importBundle(ctx context.Context, req pullRequest, r io.Reader) (store.Snapshot, bool, error) {
	body := &limitedBody{r: r, left: p.maxImport, limit: p.maxImport}
	br, err := snapbundle.NewReader(body)
	if err != nil {
		return store.Snapshot{}, false, err
	}
	h := br.Header
	if h.Snapshot.ID != req.Snapshot {
		return store.Snapshot{}, false, fmt.Errorf("peer %s sent snapshot %s for %s: %w", req.From, h.Snapshot.ID, req.Snapshot, errdefs.ErrInvalid)
	}
	ahead := br.ReadAhead()
	defer ahead.Close()
	ireq := importRequestOf(br, ahead)
	ireq.RequireMemory = req.Memory == memoryRequire
	if req.dropped != nil {
		ireq.MemoryDropped = func(why string) { *req.dropped = why }
	}
	return p.snapshots.ImportSnapshot(ctx, req.Team, ireq)
}

// dropStaleSpools removes the bytes of pulls nobody retried.
func (p *puller) dropStaleSpools() {
	old, _ := filepath.Glob(filepath.Join(p.SpoolDir, "*.part"))
	for _, path := range old {
		if st, err := os.Stat(path); err == nil && time.Since(st.ModTime()) > spoolMaxAge {
			os.Remove(path)
		}
	}
}
