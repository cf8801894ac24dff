package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
)

// FilesService reads and writes files inside sandboxes (the API's files routes).
type FilesService struct{ t *transport }

// Read opens a file in a sandbox for reading. The caller closes it.
func (s *FilesService) Read(ctx context.Context, id, path string) (io.ReadCloser, error) {
	resp, err := s.t.send(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/files"), query: url.Values{"path": {path}}})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Write creates or replaces a file in a sandbox with the bytes of r.
// A zero mode and an empty user take the server's defaults.
func (s *FilesService) Write(ctx context.Context, id, path string, r io.Reader, mode os.FileMode, user string) (EntryInfo, error) {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", unixMode(mode))
	}
	if user != "" {
		q.Set("user", user)
	}
	var info EntryInfo
	err := s.t.call(ctx, request{method: http.MethodPut, path: sandboxPath(id, "/files"), query: q, body: r,
		contentType: "application/octet-stream"}, &info)
	return info, err
}

// Stat describes one file in a sandbox.
func (s *FilesService) Stat(ctx context.Context, id, path string) (EntryInfo, error) {
	var info EntryInfo
	err := s.t.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/files/stat"), query: url.Values{"path": {path}}}, &info)
	return info, err
}

// List lists a directory in a sandbox, descending depth levels (0 = the
// server's default of 1).
func (s *FilesService) List(ctx context.Context, id, path string, depth int) ([]EntryInfo, error) {
	q := url.Values{"path": {path}}
	if depth > 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var out []EntryInfo
	err := s.t.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/files/list"), query: q}, &out)
	return out, err
}

// MakeDir creates a directory (and its missing parents) in a sandbox.
func (s *FilesService) MakeDir(ctx context.Context, id, path string) (EntryInfo, error) {
	var info EntryInfo
	err := s.t.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "/files/mkdir"), query: url.Values{"path": {path}}}, &info)
	return info, err
}

// Move renames a file or directory in a sandbox.
func (s *FilesService) Move(ctx context.Context, id, source, destination string) (EntryInfo, error) {
	var info EntryInfo
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/files/move"), MoveRequest{Source: source, Destination: destination})
	if err != nil {
		return info, err
	}
	err = s.t.call(ctx, r, &info)
	return info, err
}

// Remove deletes a file or a directory tree in a sandbox.
func (s *FilesService) Remove(ctx context.Context, id, path string) error {
	return s.t.call(ctx, request{method: http.MethodDelete, path: sandboxPath(id, "/files"), query: url.Values{"path": {path}}}, nil)
}

// unixMode renders mode as the octal text the server parses ("0644"),
// moving Go's setuid/setgid/sticky flags to their Unix bits.
func unixMode(mode os.FileMode) string {
	m := uint32(mode.Perm())
	if mode&os.ModeSetuid != 0 {
		m |= 0o4000
	}
	if mode&os.ModeSetgid != 0 {
		m |= 0o2000
	}
	if mode&os.ModeSticky != 0 {
		m |= 0o1000
	}
	return fmt.Sprintf("%04o", m)
}
