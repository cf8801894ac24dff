package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// VolumesService manages shared volumes (E2B's Volume) and reaches their
// content.
type VolumesService struct{ t *transport }

// Create makes a volume; sizeMB 0 takes the server's default cap.
func (s *VolumesService) Create(ctx context.Context, name string, sizeMB int64) (VolumeAndToken, error) {
	var v VolumeAndToken
	r, err := jsonBody(http.MethodPost, "/volumes", NewVolume{Name: name, SizeMB: sizeMB})
	if err != nil {
		return v, err
	}
	err = s.t.call(ctx, r, &v)
	return v, err
}

// List returns the team's volumes by name.
func (s *VolumesService) List(ctx context.Context) ([]Volume, error) {
	var out []Volume
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/volumes"}, &out)
	return out, err
}

// Get returns a volume, by id or name, with its content token.
func (s *VolumesService) Get(ctx context.Context, idOrName string) (VolumeAndToken, error) {
	var v VolumeAndToken
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/volumes/" + url.PathEscape(idOrName)}, &v)
	return v, err
}

// Delete removes a volume and its content (409 while a sandbox mounts it).
func (s *VolumesService) Delete(ctx context.Context, idOrName string) error {
	return s.t.call(ctx, request{method: http.MethodDelete, path: "/volumes/" + url.PathEscape(idOrName)}, nil)
}

// Content reaches the content of v with its token.
func (s *VolumesService) Content(v VolumeAndToken) *VolumeContent {
	return &VolumeContent{t: s.t, id: v.VolumeID, token: v.Token}
}

// VolumeContent reads and writes one volume's files (the content API,
// /volumecontent/{id}/...), authorised by the volume's token.
type VolumeContent struct {
	t         *transport
	id, token string
}

func (c *VolumeContent) req(method, what, path string, q url.Values) request {
	if q == nil {
		q = url.Values{}
	}
	q.Set("path", path)
	return request{method: method, path: "/volumecontent/" + url.PathEscape(c.id) + "/" + what, query: q,
		header: http.Header{"Authorization": {"Bearer " + c.token}}}
}

// Read opens a file for reading. The caller closes it.
func (c *VolumeContent) Read(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := c.t.send(ctx, c.req(http.MethodGet, "file", path, nil))
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Write creates or replaces a file with the bytes of r, making missing
// parent directories.
func (c *VolumeContent) Write(ctx context.Context, path string, r io.Reader) (VolumeEntry, error) {
	var e VolumeEntry
	req := c.req(http.MethodPut, "file", path, url.Values{"force": {"true"}})
	req.body, req.contentType = r, "application/octet-stream"
	err := c.t.call(ctx, req, &e)
	return e, err
}

// Stat describes one path.
func (c *VolumeContent) Stat(ctx context.Context, path string) (VolumeEntry, error) {
	var e VolumeEntry
	err := c.t.call(ctx, c.req(http.MethodGet, "path", path, nil), &e)
	return e, err
}

// List lists a directory, depth levels deep (0: 1).
func (c *VolumeContent) List(ctx context.Context, path string, depth int) ([]VolumeEntry, error) {
	q := url.Values{}
	if depth > 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var out []VolumeEntry
	err := c.t.call(ctx, c.req(http.MethodGet, "dir", path, q), &out)
	return out, err
}

// MakeDir makes a directory and its missing parents.
func (c *VolumeContent) MakeDir(ctx context.Context, path string) (VolumeEntry, error) {
	var e VolumeEntry
	err := c.t.call(ctx, c.req(http.MethodPost, "dir", path, url.Values{"force": {"true"}}), &e)
	return e, err
}

// Remove removes a file, or a directory with its content.
func (c *VolumeContent) Remove(ctx context.Context, path string) error {
	return c.t.call(ctx, c.req(http.MethodDelete, "path", path, nil), nil)
}
