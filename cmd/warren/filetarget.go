package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/client"
)

// volumePrefix names a shared volume where `warren files` takes a sandbox
// id: `warren files ls vol:data /`.
const volumePrefix = "vol:"

// fileTarget is where `warren files` works: a sandbox (through the API's
// files routes) or a shared volume (through its content API).
type fileTarget interface {
	Read(ctx context.Context, path string) (io.ReadCloser, error)
	Write(ctx context.Context, path string, r io.Reader, mode os.FileMode, user string) (client.EntryInfo, error)
	Stat(ctx context.Context, path string) (client.EntryInfo, error)
	List(ctx context.Context, path string, depth int) ([]client.EntryInfo, error)
	MakeDir(ctx context.Context, path string) (client.EntryInfo, error)
	Remove(ctx context.Context, path string) error
}

// fileTarget resolves `warren files`' first argument: vol:NAME is a
// volume (its token fetched with the API key), anything else a sandbox.
func (a *app) fileTarget(ctx context.Context, id string) (fileTarget, error) {
	c := a.client()
	name, ok := strings.CutPrefix(id, volumePrefix)
	if !ok {
		return sandboxFiles{files: c.Files, id: id}, nil
	}
	v, err := c.Volumes.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return volumeFiles{c: c.Volumes.Content(v)}, nil
}

type sandboxFiles struct {
	files *client.FilesService
	id    string
}

func (s sandboxFiles) Read(ctx context.Context, p string) (io.ReadCloser, error) {
	return s.files.Read(ctx, s.id, p)
}
func (s sandboxFiles) Write(ctx context.Context, p string, r io.Reader, mode os.FileMode, user string) (client.EntryInfo, error) {
	return s.files.Write(ctx, s.id, p, r, mode, user)
}
func (s sandboxFiles) Stat(ctx context.Context, p string) (client.EntryInfo, error) {
	return s.files.Stat(ctx, s.id, p)
}
func (s sandboxFiles) List(ctx context.Context, p string, depth int) ([]client.EntryInfo, error) {
	return s.files.List(ctx, s.id, p, depth)
}
func (s sandboxFiles) MakeDir(ctx context.Context, p string) (client.EntryInfo, error) {
	return s.files.MakeDir(ctx, s.id, p)
}
func (s sandboxFiles) Remove(ctx context.Context, p string) error {
	return s.files.Remove(ctx, s.id, p)
}

type volumeFiles struct{ c *client.VolumeContent }

func (v volumeFiles) Read(ctx context.Context, p string) (io.ReadCloser, error) {
	return v.c.Read(ctx, p)
}
func (v volumeFiles) Write(ctx context.Context, p string, r io.Reader, mode os.FileMode, user string) (client.EntryInfo, error) {
	if mode != 0 || user != "" {
		return client.EntryInfo{}, usageError{errors.New("--mode and --user are for sandboxes; a volume's files belong to the sandboxes' user")}
	}
	e, err := v.c.Write(ctx, p, r)
	return entryInfoOf(e), err
}
func (v volumeFiles) Stat(ctx context.Context, p string) (client.EntryInfo, error) {
	e, err := v.c.Stat(ctx, p)
	return entryInfoOf(e), err
}
func (v volumeFiles) List(ctx context.Context, p string, depth int) ([]client.EntryInfo, error) {
	es, err := v.c.List(ctx, p, depth)
	out := make([]client.EntryInfo, len(es))
	for i, e := range es {
		out[i] = entryInfoOf(e)
	}
	return out, err
}
func (v volumeFiles) MakeDir(ctx context.Context, p string) (client.EntryInfo, error) {
	e, err := v.c.MakeDir(ctx, p)
	return entryInfoOf(e), err
}
func (v volumeFiles) Remove(ctx context.Context, p string) error { return v.c.Remove(ctx, p) }

// entryInfoOf shows a volume's entry as the sandbox files routes do.
func entryInfoOf(e client.VolumeEntry) client.EntryInfo {
	typ := e.Type
	switch typ {
	case "directory":
		typ = "dir"
	case "unknown":
		typ = "other"
	}
	mode := fs.FileMode(e.Mode & 0o777)
	if typ == "dir" {
		mode |= fs.ModeDir
	}
	return client.EntryInfo{Name: e.Name, Path: e.Path, Type: typ, Size: e.Size, Mode: e.Mode,
		Permissions: mode.String(), Owner: strconv.FormatUint(uint64(e.UID), 10), Group: strconv.FormatUint(uint64(e.GID), 10),
		ModifiedTime: e.Mtime, SymlinkTarget: e.Target}
}
