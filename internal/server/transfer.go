package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/snapbundle"
	"github.com/warrenhq/warren/internal/store"
)

// bundleType is the media type of a snapshot bundle.
const bundleType = "application/vnd.warren.snapshot-bundle"

// headerMemoryImage says what became of a snapshot's memory image: on an
// export, "included" or "omitted"; on an import, "imported" or "dropped"
// (this node cannot restore it; the files alone were imported), with the
// reason in headerMemoryDropped.
const (
	headerMemoryImage   = "X-Warren-Memory-Image"
	headerMemoryDropped = "X-Warren-Memory-Dropped"
)

func bundleHeaderOf(info session.ExportInfo) snapbundle.Header {
	s := info.Snapshot
	return snapbundle.Header{
		Format:        info.Format,
		Base:          info.Base,
		MemoryLeftOut: info.MemoryLeftOut,
		Memory:        bundleMemoryOf(info.Memory),
		Snapshot: snapbundle.Record{
			ID: s.ID, SandboxID: s.SandboxID, Family: s.Family, Name: s.Name, Kind: string(s.Kind),
			Turn: s.Turn, ParentID: s.ParentID, Lineage: info.Lineage, Template: s.Template,
			Runtime: info.Runtime, Labels: s.Labels, ExclusiveBytes: s.ExclusiveBytes,
			ReferencedBytes: s.ReferencedBytes, CreatedAt: s.CreatedAt,
		},
	}
}

func bundleMemoryOf(m *session.MemoryImage) *snapbundle.Memory {
	if m == nil {
		return nil
	}
	return &snapbundle.Memory{Format: snapbundle.FormatTar, Bytes: m.Bytes, Runtime: m.Runtime}
}

func snapshotOfBundle(r snapbundle.Record) store.Snapshot {
	return store.Snapshot{
		ID: r.ID, SandboxID: r.SandboxID, Family: r.Family, Name: r.Name, Kind: store.SnapshotKind(r.Kind),
		Turn: r.Turn, ParentID: r.ParentID, Template: r.Template, Labels: r.Labels, CreatedAt: r.CreatedAt,
	}
}

// importRequestOf is the import of the bundle br whose body ahead reads.
func importRequestOf(br *snapbundle.Reader, ahead *snapbundle.Ahead) session.ImportRequest {
	h := br.Header
	req := session.ImportRequest{
		Snapshot: snapshotOfBundle(h.Snapshot),
		Base:     h.Base,
		Format:   h.Format,
		Body:     ahead,
		Verify: func(memory func(io.Reader) error) error {
			br.MemoryTo(memory)
			return ahead.Verify()
		},
	}
	if m := h.Memory; m != nil {
		req.Memory = &session.MemoryImage{Bytes: m.Bytes, Runtime: m.Runtime}
	}
	return req
}

// Values of the memory query parameter of exports and imports.
const (
	memoryRequire = "require" // import: refuse a memory image this node cannot restore
	memoryOmit    = "omit"    // export: send the files only
)

// memoryParam reads ?memory= (allowed: the values this route takes).
func memoryParam(r *http.Request, allowed ...string) (string, error) {
	v := r.URL.Query().Get("memory")
	if v == "" {
		return "", nil
	}
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", fmt.Errorf("memory=%q: this route takes %q or nothing: %w", v, strings.Join(allowed, `", "`), errdefs.ErrInvalid)
}

// exportTeam is the team an export reads the snapshot of: the caller's,
// or, for an admin key (a node pulling for a team), the one ?team= names.
func exportTeam(r *http.Request) (string, error) {
	team, want := teamOf(r), r.URL.Query().Get("team")
	if want == "" || want == team {
		return team, nil
	}
	if team != AdminTeam {
		return "", fmt.Errorf("only an admin key exports for another team (?team=%s): %w", want, errdefs.ErrPermissionDenied)
	}
	return want, nil
}

// errHeadOnly ends an export asked for its header only (?head=true): what
// a puller reads to choose the base of the bundle it then asks for.
var errHeadOnly = errors.New("header only")

// exportSnapshot streams a snapshot bundle. Once the answer has started a
// failure can only cut the connection: the bundle then has no trailer, and
// an importer refuses it as truncated.
func (s *snapshotRoutes) exportSnapshot(w http.ResponseWriter, r *http.Request) {
	id, q := r.PathValue("id"), r.URL.Query()
	team, err := exportTeam(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	memory, err := memoryParam(r, memoryOmit)
	if err != nil {
		writeError(w, r, err)
		return
	}
	offset, err := snapbundle.ParseOffset(q.Get("offset"))
	if err == nil && offset > 0 && q.Get("identity") == "" {
		err = fmt.Errorf("an offset needs the identity of the bundle it is into (?identity=, from the %s header): %w", headerBundleIdentity, errdefs.ErrInvalid)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	s.streamExport(w, r, exportRange{team: team, id: id, base: q.Get("base"), offset: offset,
		identity: q.Get("identity"), headOnly: q.Get("head") == "true", noMemory: memory == memoryOmit})
}

// exportRange is what an export streams: team's snapshot id as a bundle
// against base, from offset on (a resumed pull, into the bundle of that
// identity), or its header alone.
type exportRange struct {
	team, id, base string
	offset         int64
	identity       string
	headOnly       bool
	noMemory       bool // leave the memory image out
}

// streamExport streams the bundle x names.
func (s *snapshotRoutes) streamExport(w http.ResponseWriter, r *http.Request, x exportRange) {
	id, offset := x.id, x.offset
	var bw *snapbundle.Writer
	err := s.snapshots.ExportSnapshot(r.Context(), x.team, id, x.base, !x.noMemory,
		func(info session.ExportInfo) (session.ExportSink, error) {
			hdr := bundleHeaderOf(info)
			identity := snapbundle.Identity(hdr)
			if want := x.identity; want != "" && want != identity {
				return nil, fmt.Errorf("the bundle of snapshot %s is no longer the one of identity %s (now %s); pull it again from the start: %w", id, want, identity, errdefs.ErrConflict)
			}
			w.Header().Set(headerBundleIdentity, identity)
			if offset > 0 {
				w.Header().Set(headerBundleOffset, strconv.FormatInt(offset, 10))
			}
			w.Header().Set("Content-Type", bundleType)
			w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", id+".wsnap"))
			switch {
			case info.Memory != nil:
				w.Header().Set(headerMemoryImage, "included")
			case info.MemoryLeftOut:
				w.Header().Set(headerMemoryImage, "omitted")
			}
			w.WriteHeader(http.StatusOK)
			var err error
			bw, err = snapbundle.NewWriterAt(w, hdr, offset)
			if err == nil && x.headOnly {
				return nil, errHeadOnly
			}
			return bw, err
		})
	if errors.Is(err, errHeadOnly) {
		return
	}
	if err == nil {
		err = bw.Close()
	}
	if err == nil {
		return
	}
	if bw == nil {
		writeError(w, r, err)
		return
	}
	s.log.Warn("snapshot export cut short", "snapshot", id, "err", err)
	panic(http.ErrAbortHandler)
}

// limitedBody reads at most limit bytes of a request body and notes when
// the body goes past them (the bundle reader and the storage's stream
// reader word what they see as a damaged stream; this tells it apart).
type limitedBody struct {
	r     io.Reader
	left  int64
	limit int64
	over  bool
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			l.over = true
			return 0, fmt.Errorf("the bundle is over this server's limit of %d bytes (--max-import-mb): %w", l.limit, errTooLarge)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// importSnapshot rebuilds a snapshot from a bundle in the request body.
func (s *snapshotRoutes) importSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, created, ok := s.importBundle(w, r, teamOf(r))
	if !ok {
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	out := snapshotOf(snap)
	out.MemoryDropped = w.Header().Get(headerMemoryDropped)
	writeJSON(w, status, out)
}

// importBundle imports the bundle in the request body as team's; on an
// error it has answered (ok false).
func (s *snapshotRoutes) importBundle(w http.ResponseWriter, r *http.Request, team string) (snap store.Snapshot, created, ok bool) {
	body := &limitedBody{r: r.Body, left: s.maxImport, limit: s.maxImport}
	var ahead *snapbundle.Ahead
	fail := func(err error) {
		if ahead != nil {
			ahead.Close() // it reads body
		}
		if body.over {
			err = fmt.Errorf("the bundle is over this server's limit of %d bytes (--max-import-mb): %w", s.maxImport, errTooLarge)
		}
		writeError(w, r, err)
	}
	memory, err := memoryParam(r, memoryRequire)
	if err != nil {
		fail(err)
		return store.Snapshot{}, false, false
	}
	br, err := snapbundle.NewReader(body)
	if err != nil {
		fail(err)
		return store.Snapshot{}, false, false
	}
	// The body is read and hashed in a goroutine of its own while the
	// storage writes what came before; it must end before this handler
	// does (nothing may read a request's body after).
	ahead = br.ReadAhead()
	defer ahead.Close()
	req := importRequestOf(br, ahead)
	req.Rename = r.URL.Query().Get("rename") == "true"
	req.RequireMemory = memory == memoryRequire
	dropped := ""
	req.MemoryDropped = func(why string) { dropped = why }
	snap, created, err = s.snapshots.ImportSnapshot(r.Context(), team, req)
	if err != nil {
		fail(err)
		return store.Snapshot{}, false, false
	}
	switch {
	case dropped != "":
		w.Header().Set(headerMemoryImage, "dropped")
		w.Header().Set(headerMemoryDropped, dropped)
	case snap.MemoryBytes > 0 && created:
		w.Header().Set(headerMemoryImage, "imported")
	}
	return snap, created, true
}
