package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/sharedvol"
	"github.com/warrenhq/warren/internal/store"
)

// Volumes is what the API needs of the shared volumes: their lifecycle
// (VolumeAdmin) and their content.
type Volumes interface {
	VolumeAdmin
	VolumeContent
}

// VolumeAdmin creates, finds and deletes a team's volumes.
type VolumeAdmin interface {
	Create(ctx context.Context, team, name string, sizeBytes int64) (store.Volume, error)
	Get(ctx context.Context, team, idOrName string) (store.Volume, error)
	List(ctx context.Context, team string) ([]store.Volume, error)
	Delete(ctx context.Context, team, idOrName string) error
	Usage(ctx context.Context, v store.Volume) int64
	SandboxMounts(ctx context.Context, sandboxID string) ([]store.VolumeMount, error)
}

// VolumeContent reads and writes what a volume holds, for the holder of
// its token.
type VolumeContent interface {
	Authorize(ctx context.Context, id, token string) (store.Volume, error)
	Stat(ctx context.Context, v store.Volume, path string) (sharedvol.Entry, error)
	ListDir(ctx context.Context, v store.Volume, path string, depth int) ([]sharedvol.Entry, error)
	MakeDir(ctx context.Context, v store.Volume, path string, parents bool, o sharedvol.Owner) (sharedvol.Entry, error)
	WriteFile(ctx context.Context, v store.Volume, path string, parents bool, o sharedvol.Owner, body io.Reader) (sharedvol.Entry, error)
	ReadFile(ctx context.Context, v store.Volume, path string) (*os.File, sharedvol.Entry, error)
	Remove(ctx context.Context, v store.Volume, path string) error
	UpdateMetadata(ctx context.Context, v store.Volume, path string, o sharedvol.Owner) (sharedvol.Entry, error)
}

// volumeRoutes serve E2B's volumes: /volumes with the API key, and the
// content API /volumecontent/{id}/... with the volume's own token.
type volumeRoutes struct {
	volumes   Volumes
	maxUpload int64
}

// routes registers the volumes' routes; auth admits a request with a valid
// API key. The content API takes the volume's own token instead.
func (s *volumeRoutes) routes(m *routeMux, auth func(http.HandlerFunc) http.Handler) {
	m.Handle("POST /volumes", auth(s.createVolume))
	m.Handle("GET /volumes", auth(s.listVolumes))
	m.Handle("GET /volumes/{id}", auth(s.getVolume))
	m.Handle("DELETE /volumes/{id}", auth(s.deleteVolume))
	m.HandleFunc("GET /volumecontent/{id}/dir", s.listDir)
	m.HandleFunc("POST /volumecontent/{id}/dir", s.makeDir)
	m.HandleFunc("GET /volumecontent/{id}/path", s.statPath)
	m.HandleFunc("PATCH /volumecontent/{id}/path", s.updatePath)
	m.HandleFunc("DELETE /volumecontent/{id}/path", s.removePath)
	m.HandleFunc("GET /volumecontent/{id}/file", s.readFile)
	m.HandleFunc("PUT /volumecontent/{id}/file", s.writeFile)
}

func (s *volumeRoutes) available(w http.ResponseWriter, r *http.Request) bool {
	if s.volumes == nil {
		writeError(w, r, fmt.Errorf("this server has no shared volumes: %w", errdefs.ErrUnsupported))
		return false
	}
	return true
}

func (s *volumeRoutes) createVolume(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	var body client.NewVolume
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	if body.SizeMB < 0 || body.SizeMB > 1<<30 {
		writeError(w, r, fmt.Errorf("sizeMB must be 0..%d: %w", 1<<30, errdefs.ErrInvalid))
		return
	}
	v, err := s.volumes.Create(r.Context(), teamOf(r), body.Name, body.SizeMB<<20)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, client.VolumeAndToken{Volume: s.volumeOf(r.Context(), v), Token: v.Token})
}

func (s *volumeRoutes) listVolumes(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	vs, err := s.volumes.List(r.Context(), teamOf(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]client.Volume, len(vs))
	for i, v := range vs {
		out[i] = s.volumeOf(r.Context(), v)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *volumeRoutes) getVolume(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	v, err := s.volumes.Get(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, client.VolumeAndToken{Volume: s.volumeOf(r.Context(), v), Token: v.Token})
}

func (s *volumeRoutes) deleteVolume(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	if err := s.volumes.Delete(r.Context(), teamOf(r), r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *volumeRoutes) volumeOf(ctx context.Context, v store.Volume) client.Volume {
	return client.Volume{VolumeID: v.ID, Name: v.Name, SizeMB: v.SizeBytes >> 20, UsedBytes: s.volumes.Usage(ctx, v), CreatedAt: v.CreatedAt}
}

// contentVolume authorises a content API call: the volume's token as a
// bearer token (as E2B's SDK sends it).
func (s *volumeRoutes) contentVolume(w http.ResponseWriter, r *http.Request) (store.Volume, bool) {
	if !s.available(w, r) {
		return store.Volume{}, false
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	v, err := s.volumes.Authorize(r.Context(), r.PathValue("id"), strings.TrimSpace(token))
	if err != nil {
		writeError(w, r, err)
		return store.Volume{}, false
	}
	return v, true
}

func (s *volumeRoutes) listDir(w http.ResponseWriter, r *http.Request) {
	v, ok := s.contentVolume(w, r)
	if !ok {
		return
	}
	depth := 1
	if d := r.URL.Query().Get("depth"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 || n > 64 {
			writeError(w, r, fmt.Errorf("depth %q must be 1..64: %w", d, errdefs.ErrInvalid))
			return
		}
		depth = n
	}
	es, err := s.volumes.ListDir(r.Context(), v, r.URL.Query().Get("path"), depth)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]client.VolumeEntry, len(es))
	for i, e := range es {
		out[i] = volumeEntryOf(e)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *volumeRoutes) makeDir(w http.ResponseWriter, r *http.Request) {
	v, ok := s.contentVolume(w, r)
	if !ok {
		return
	}
	o, force, err := ownerQuery(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	e, err := s.volumes.MakeDir(r.Context(), v, r.URL.Query().Get("path"), force, o)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, volumeEntryOf(e))
}

func (s *volumeRoutes) statPath(w http.ResponseWriter, r *http.Request) {
	v, ok := s.contentVolume(w, r)
	if !ok {
		return
	}
	e, err := s.volumes.Stat(r.Context(), v, r.URL.Query().Get("path"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, volumeEntryOf(e))
}

func (s *volumeRoutes) updatePath(w http.ResponseWriter, r *http.Request) {
	v, ok := s.contentVolume(w, r)
	if !ok {
		return
	}
	var body client.VolumeMetadata
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	e, err := s.volumes.UpdateMetadata(r.Context(), v, r.URL.Query().Get("path"), sharedvol.Owner{UID: body.UID, GID: body.GID, Mode: body.Mode})
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, volumeEntryOf(e))
}

func (s *volumeRoutes) removePath(w http.ResponseWriter, r *http.Request) {
	v, ok := s.contentVolume(w, r)
	if !ok {
		return
	}
	if err := s.volumes.Remove(r.Context(), v, r.URL.Query().Get("path")); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *volumeRoutes) readFile(w http.ResponseWriter, r *http.Request) {
	v, ok := s.contentVolume(w, r)
	if !ok {
		return
	}
	f, e, err := s.volumes.ReadFile(r.Context(), v, r.URL.Query().Get("path"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", e.Mtime, f)
}

func (s *volumeRoutes) writeFile(w http.ResponseWriter, r *http.Request) {
	v, ok := s.contentVolume(w, r)
	if !ok {
		return
	}
	o, force, err := ownerQuery(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	e, err := s.volumes.WriteFile(r.Context(), v, r.URL.Query().Get("path"), force, o, http.MaxBytesReader(w, r.Body, s.maxUpload))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		err = fmt.Errorf("upload is larger than this server's limit of %d bytes: %w", s.maxUpload, errTooLarge)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, volumeEntryOf(e))
}

// ownerQuery reads uid, gid, mode and force from the query (E2B's
// makeDir and writeFile options); mode is the permission bits as a
// decimal number (493 for 0755), as the SDK sends a JavaScript number.
func ownerQuery(r *http.Request) (sharedvol.Owner, bool, error) {
	q := r.URL.Query()
	var o sharedvol.Owner
	num := func(name string, base int, max uint64) (*uint32, error) {
		s := q.Get(name)
		if s == "" {
			return nil, nil
		}
		n, err := strconv.ParseUint(s, base, 32)
		if err != nil || n > max {
			return nil, fmt.Errorf("%s %q is not a valid number: %w", name, s, errdefs.ErrInvalid)
		}
		v := uint32(n)
		return &v, nil
	}
	var err error
	if o.UID, err = num("uid", 10, 1<<31-1); err != nil {
		return o, false, err
	}
	if o.GID, err = num("gid", 10, 1<<31-1); err != nil {
		return o, false, err
	}
	if o.Mode, err = num("mode", 10, 0o7777); err != nil {
		return o, false, err
	}
	force := false
	if f := q.Get("force"); f != "" {
		if force, err = strconv.ParseBool(f); err != nil {
			return o, false, fmt.Errorf("force %q is not true or false: %w", f, errdefs.ErrInvalid)
		}
	}
	return o, force, nil
}

func volumeEntryOf(e sharedvol.Entry) client.VolumeEntry {
	return client.VolumeEntry{Name: e.Name, Path: e.Path, Type: e.Type, Size: e.Size, Mode: e.Mode, UID: e.UID, GID: e.GID,
		Atime: e.Atime, Mtime: e.Mtime, Ctime: e.Ctime, Target: e.Target}
}
