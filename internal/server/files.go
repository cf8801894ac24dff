package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/commands"
	"github.com/warrenhq/warren/internal/errdefs"
)

// Files is what the file routes need: the command service
// (*commands.Service), which admits each file call and runs it through the
// sandbox's agent.
type Files interface {
	Stat(ctx context.Context, team, id, path string) (client.EntryInfo, error)
	ListDir(ctx context.Context, team, id, path string, depth uint32) ([]client.EntryInfo, error)
	MakeDir(ctx context.Context, team, id, path, user string) (client.EntryInfo, error)
	Remove(ctx context.Context, team, id, path string) error
	Move(ctx context.Context, team, id, source, destination string) (client.EntryInfo, error)
	ReadFile(ctx context.Context, team, id, path string) (*commands.FileReader, error)
	WriteFile(ctx context.Context, team, id string, req commands.WriteFileRequest, body io.Reader) (client.EntryInfo, error)
}

// fileRoutes serve file calls in a sandbox.
type fileRoutes struct {
	files     Files
	log       *slog.Logger
	maxUpload int64 // bytes of one upload (--max-upload-mb)
}

// pathParam returns the request's ?path=, checked for shape only: the
// agent resolves it inside the sandbox, where `..` cannot leave the root.
func pathParam(r *http.Request, name string) (string, error) {
	p := r.URL.Query().Get(name)
	switch {
	case p == "":
		return "", fmt.Errorf("query parameter %q (a path inside the sandbox) is missing: %w", name, errdefs.ErrInvalid)
	case len(p) > commands.MaxPathLen:
		return "", fmt.Errorf("%s is longer than %d bytes: %w", name, commands.MaxPathLen, errdefs.ErrInvalid)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%s holds a NUL byte: %w", name, errdefs.ErrInvalid)
	}
	return p, nil
}

// fileRoute serves a file call on the request's ?path=: decode, call,
// encode.
func fileRoute[T any](call func(r *http.Request, team, id, path string) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := pathParam(r, "path")
		if err != nil {
			writeError(w, r, err)
			return
		}
		out, err := call(r, teamOf(r), r.PathValue("id"), p)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func (s *fileRoutes) statFile(w http.ResponseWriter, r *http.Request) {
	fileRoute(func(r *http.Request, team, id, p string) (client.EntryInfo, error) {
		return s.files.Stat(r.Context(), team, id, p)
	})(w, r)
}

func (s *fileRoutes) makeDir(w http.ResponseWriter, r *http.Request) {
	fileRoute(func(r *http.Request, team, id, p string) (client.EntryInfo, error) {
		return s.files.MakeDir(r.Context(), team, id, p, r.URL.Query().Get("user"))
	})(w, r)
}

func (s *fileRoutes) listDir(w http.ResponseWriter, r *http.Request) {
	fileRoute(func(r *http.Request, team, id, p string) ([]client.EntryInfo, error) {
		depth := uint64(1)
		if v := r.URL.Query().Get("depth"); v != "" {
			d, err := strconv.ParseUint(v, 10, 32)
			if err != nil || d < 1 || d > commands.MaxListDepth {
				return nil, fmt.Errorf("depth %q: want 1..%d: %w", v, commands.MaxListDepth, errdefs.ErrInvalid)
			}
			depth = d
		}
		return s.files.ListDir(r.Context(), team, id, p, uint32(depth))
	})(w, r)
}

func (s *fileRoutes) removeFile(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r, "path")
	if err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.files.Remove(r.Context(), teamOf(r), r.PathValue("id"), p); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *fileRoutes) moveFile(w http.ResponseWriter, r *http.Request) {
	var body client.MoveRequest
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	if body.Source == "" || body.Destination == "" || len(body.Source) > commands.MaxPathLen || len(body.Destination) > commands.MaxPathLen {
		writeError(w, r, fmt.Errorf("give source and destination paths (each at most %d bytes): %w", commands.MaxPathLen, errdefs.ErrInvalid))
		return
	}
	res, err := s.files.Move(r.Context(), teamOf(r), r.PathValue("id"), body.Source, body.Destination)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *fileRoutes) readFile(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r, "path")
	if err != nil {
		writeError(w, r, err)
		return
	}
	f, err := s.files.ReadFile(r.Context(), teamOf(r), r.PathValue("id"), p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if size := f.Size(); size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(http.StatusOK)
	for {
		data, err := f.Next()
		if len(data) > 0 {
			if _, werr := w.Write(data); werr != nil {
				return // the client went away
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			// Too late for a status: cut the response so the client sees
			// a short body rather than a silently truncated file.
			s.log.Warn("read file cut short", "path", p, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
}

func (s *fileRoutes) writeFile(w http.ResponseWriter, r *http.Request) {
	limit := s.maxUpload
	if r.ContentLength > limit {
		writeError(w, r, errUploadTooLarge(limit))
		return
	}
	p, err := pathParam(r, "path")
	if err != nil {
		writeError(w, r, err)
		return
	}
	req := commands.WriteFileRequest{Path: p, Mode: 0o644, User: r.URL.Query().Get("user"), MakeParents: r.URL.Query().Get("parents") != "false"}
	if v := r.URL.Query().Get("mode"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o7777 {
			writeError(w, r, fmt.Errorf("mode %q: want octal permission bits such as 0644: %w", v, errdefs.ErrInvalid))
			return
		}
		req.Mode = uint32(m)
	}
	res, err := s.files.WriteFile(r.Context(), teamOf(r), r.PathValue("id"), req, http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		err = errUploadTooLarge(limit)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// uploadLimit bounds one file upload, through warren's API and E2B's
// sandbox plane alike (--max-upload-mb).
func uploadLimit(maxUploadBytes int64) int64 {
	if maxUploadBytes > 0 {
		return maxUploadBytes
	}
	return defaultMaxUpload
}

func errUploadTooLarge(limit int64) error {
	return fmt.Errorf("upload is over this server's limit of %d bytes (--max-upload-mb): %w", limit, errTooLarge)
}
