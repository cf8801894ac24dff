package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/tplbuild"
)

// fileBuild is `warren template build NAME --file template.json`: the
// SDK's Template.toJSON form, built by the server in a sandbox through
// the template build API (POST /v3/templates), as the SDK builds it.
type fileBuild struct {
	file    string
	context string
	tags    []string
	// runtime (--runtime) overrides the file's "runtime".
	runtime string
	// The build sandbox's network (warren's extension of the build body):
	// set, they replace the file's allowInternetAccess and network.
	internet    bool
	allow, deny []string
}

func (f *fileBuild) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.file, "file", "", "build through the daemon from a template JSON file (the e2b SDK's Template.toJSON form): steps run in a sandbox, with a step cache")
	fl.StringVar(&f.context, "context", "", "with --file: the directory copy steps' sources are relative to (default: the file's directory)")
	fl.StringArrayVar(&f.tags, "tag", nil, "with --file: a tag for the build (repeatable; default: default)")
	fl.BoolVar(&f.internet, "internet", false, "with --file: the build sandbox reaches the internet (--internet=false: loopback only, unless --allow-out; default: the server's --template-build-internet)")
	fl.StringArrayVar(&f.allow, "allow-out", nil, "with --file: a destination the build sandbox may reach (repeatable; with --deny-out 0.0.0.0/0: only those)")
	fl.StringArrayVar(&f.deny, "deny-out", nil, "with --file: a destination the build sandbox never reaches (repeatable)")
}

// network puts the network flags given into spec.
func (f *fileBuild) network(cmd *cobra.Command, spec *tplbuild.Spec) {
	fl := cmd.Flags()
	if fl.Changed("internet") {
		spec.AllowInternetAccess = &f.internet
	}
	if fl.Changed("allow-out") || fl.Changed("deny-out") {
		spec.Network = &tplbuild.Network{AllowOut: f.allow, DenyOut: f.deny}
	}
}

func (f *fileBuild) run(cmd *cobra.Command, a *app, name string) error {
	raw, err := os.ReadFile(f.file)
	if err != nil {
		return err
	}
	var spec tplbuild.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return usageError{fmt.Errorf("%s is not a template JSON file (Template.toJSON): %v", f.file, err)}
	}
	f.network(cmd, &spec)
	if f.context == "" {
		f.context = filepath.Dir(f.file)
	}
	if f.runtime != "" {
		spec.Runtime = f.runtime
	}
	a.client() // reads the admin key when none was given
	ctx := cmd.Context()
	var req struct{ TemplateID, BuildID string }
	if err := a.apiCall(ctx, http.MethodPost, "/v3/templates", map[string]any{"name": name, "tags": f.tags}, &req); err != nil {
		return err
	}
	for i, st := range spec.Steps {
		if st.Type != "COPY" || len(st.Args) < 2 {
			continue
		}
		if spec.Steps[i].FilesHash, err = f.upload(ctx, a, req.TemplateID, st); err != nil {
			return fmt.Errorf("step %d (COPY %s): %w", i+1, st.Args[0], err)
		}
	}
	base := "/templates/" + req.TemplateID + "/builds/" + req.BuildID
	if err := a.apiCall(ctx, http.MethodPost, "/v2"+base, spec, nil); err != nil {
		return err
	}
	return followBuild(ctx, a, base+"/status")
}

// followBuild prints a build's log until it ends; a failed build is an
// error with its reason.
func followBuild(ctx context.Context, a *app, statusPath string) error {
	offset := 0
	for {
		var st tplbuild.Status
		if err := a.apiCall(ctx, http.MethodGet, statusPath+"?logsOffset="+strconv.Itoa(offset), nil, &st); err != nil {
			return err
		}
		for _, e := range st.LogEntries {
			fmt.Fprintf(a.errOut, "%s %-5s %s\n", e.Timestamp.Format("15:04:05.000"), e.Level, e.Message)
		}
		offset += len(st.LogEntries)
		switch st.Status {
		case tplbuild.StatusReady:
			fmt.Fprintf(a.out, "built template %s\n", st.TemplateID)
			return nil
		case tplbuild.StatusError:
			if st.Reason != nil {
				return fmt.Errorf("build failed: %s", st.Reason.Message)
			}
			return fmt.Errorf("build failed")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// upload sends a copy step's files as a gzipped tar unless the server
// has them; it returns their hash (the file's, else one of the archive).
func (f *fileBuild) upload(ctx context.Context, a *app, templateID string, st tplbuild.Step) (string, error) {
	body, err := tarContext(f.context, st.Args[0])
	if err != nil {
		return "", err
	}
	hash := st.FilesHash
	if hash == "" {
		sum := sha256.Sum256(append([]byte("COPY "+st.Args[0]+" "+st.Args[1]+"\x00"), body...))
		hash = hex.EncodeToString(sum[:])
	}
	var link struct {
		Present bool `json:"present"`
	}
	if err := a.apiCall(ctx, http.MethodGet, "/templates/"+templateID+"/files/"+hash, nil, &link); err != nil {
		return "", err
	}
	if link.Present {
		fmt.Fprintf(a.errOut, "skipping upload of %s: the server has it\n", st.Args[0])
		return hash, nil
	}
	return hash, a.apiCall(ctx, http.MethodPut, "/templates/"+templateID+"/files/"+hash, bytes.NewReader(body), nil)
}

// tarContext archives src (a file or directory under dir) with names
// relative to dir, as the SDK does.
func tarContext(dir, src string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	root := filepath.Join(dir, filepath.Clean("/"+src))
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			return copyFileInto(tw, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func copyFileInto(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// apiCall sends one request to the daemon with the CLI's key: body is
// JSON unless it is an io.Reader; out, when not nil, gets the JSON answer.
func (a *app) apiCall(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd, ctype = b, "application/octet-stream"
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(a.url, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("X-API-Key", a.apiKey)
	hc := a.httpClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e struct{ Message string }
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(b))
		}
		return fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, e.Message)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// templateCacheCmd lists the team's step cache.
func templateCacheCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cache",
		Short: "List the template step cache (a snapshot after each build step), least recently used first",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.client()
			var entries []struct {
				Key        string    `json:"key"`
				SnapshotID string    `json:"snapshotID"`
				Bytes      int64     `json:"bytes"`
				LastUsed   time.Time `json:"lastUsed"`
				InUse      bool      `json:"inUse"`
			}
			if err := a.apiCall(cmd.Context(), http.MethodGet, "/templates/builds/cache", nil, &entries); err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, entries)
			}
			tw := newTable(a.out)
			row(tw, "KEY", "SNAPSHOT", "SIZE", "LAST USED", "IN USE")
			for _, e := range entries {
				row(tw, e.Key[:min(12, len(e.Key))], e.SnapshotID, fmtBytes(e.Bytes), fmtTime(e.LastUsed), strconv.FormatBool(e.InUse))
			}
			return tw.Flush()
		},
	}
}
