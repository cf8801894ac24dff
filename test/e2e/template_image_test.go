package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warrenhq/warren/client"
)

// testRegistry is go-containerregistry's registry, in the test process,
// behind basic auth (but for reads of public/*), counting the blob (layer) downloads.
type testRegistry struct {
	host, user, pass string
	blobGets         atomic.Int64
}

func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{user: "puller", pass: "s3cret-" + strings.ToLower(t.Name())}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// public/* reads without a login, as a public repository does
		// (the SDK's fromDockerfile sends none).
		public := strings.HasPrefix(req.URL.Path, "/v2/public/") && (req.Method == http.MethodGet || req.Method == http.MethodHead)
		if u, p, ok := req.BasicAuth(); !public && (!ok || u != r.user || p != r.pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="warren-test"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
			return
		}
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			r.blobGets.Add(1)
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// pushBusybox pushes an image of one layer, made here from the host's
// static busybox (every applet a symlink to it, a root user, a marker
// file, no `user`, no bash, no sudo) and an Env in its config, as repo:tag; it returns its digest.
func (r *testRegistry) pushBusybox(t *testing.T, repo, tag string) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("no static busybox on the host: %v", err)
	}
	list, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) {
		h.ModTime = time.Unix(1700000000, 0)
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin", "etc", "root", "tmp"} {
		add(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	}
	add(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))}, bb)
	for _, a := range strings.Fields(string(list)) {
		if a != "busybox" {
			add(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}, nil)
		}
	}
	for _, fb := range [][2]string{
		{"etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"},
		{"etc/group", "root:x:0:\n"},
		{"etc/image-marker", "from the registry\n"},
	} {
		f, body := fb[0], fb[1]
		add(&tar.Header{Name: f, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}, []byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, v1.Config{Env: []string{"IMAGE_VAR=from the config"}}); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.host + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass})); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// TestTemplateImage builds templates from a registry image (issue 29):
// the npm SDK's fromImage with a login and fromDockerfile
// (templates_image.test.mjs, with bad logins, tags and registry types),
// then the CLI's --file with fromImage, which pulls nothing the second
// time; another team neither lists nor creates from the image's template,
// and the password is nowhere in the daemon's log or database.
func TestTemplateImage(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t)
	digest := reg.pushBusybox(t, "warren/busybox", "1")
	if again := reg.pushBusybox(t, "public/busybox", "1"); again != digest {
		t.Fatalf("the same image pushed twice has digests %s and %s", digest, again)
	}
	d := newDaemon(t)
	d.start()

	dir, err := filepath.Abs("e2b")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.test.mjs"))
	var others []string
	for _, f := range files {
		if n := strings.TrimSuffix(filepath.Base(f), ".test.mjs"); n != "templates_image" {
			others = append(others, n)
		}
	}
	runE2BSuite(t, "http://"+d.addr, d.key, []string{"WARREN_TEST_REGISTRY=" + reg.host,
		"WARREN_TEST_REGISTRY_USER=" + reg.user, "WARREN_TEST_REGISTRY_PASS=" + reg.pass}, others...)

	pulls := reg.blobGets.Load()
	if pulls == 0 {
		t.Fatalf("the SDK's builds pulled no layer from the registry")
	}
	cliImageBuild(t, d, reg)
	if n := reg.blobGets.Load(); n != pulls {
		t.Errorf("a build of an image digest already unpacked downloaded %d blobs, want none", n-pulls)
	}
	imageIsolation(t, d, "image-"+strings.TrimPrefix(digest, "sha256:")[:40])
	noPasswordStored(t, d, reg.pass)
}

// cliImageBuild: `warren template build --file` with fromImage and a
// registry login, as Template.toJSON writes it.
func cliImageBuild(t *testing.T, d *daemon, reg *testRegistry) {
	t.Helper()
	spec := `{"fromImage": "` + reg.host + `/warren/busybox:1",
		"fromImageRegistry": {"type": "registry", "username": "` + reg.user + `", "password": "` + reg.pass + `"},
		"steps": [
		{"type": "USER", "args": ["root"]},
		{"type": "RUN", "args": ["cat /etc/image-marker > /from-cli && id -un >> /from-cli"]}
	]}`
	file := filepath.Join(t.TempDir(), "template.json")
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out, logs, code := d.cli("", "template", "build", "img-cli", "--file", file)
	if code != 0 || !strings.Contains(logs, "nothing to pull") {
		t.Fatalf("warren template build --file from an image: exit %d\n%s\n%s", code, out, logs)
	}
	ctx := context.Background()
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "img-cli"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Sandboxes.Delete(ctx, sb.SandboxID)
	res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"cat", "/from-cli"}})
	if err != nil || res.Stdout != "from the registry\nroot\n" {
		t.Fatalf("the CLI-built template's file: %q %v", res.Stdout, err)
	}
}

// imageIsolation: another team sees no image template and cannot create
// a sandbox from one by its name.
func imageIsolation(t *testing.T, d *daemon, tmpl string) {
	t.Helper()
	ctx := context.Background()
	if _, err := d.client().Templates.List(ctx); err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(lastLine(d.mustCLI("key", "create", "--team", "strangers")))
	other := client.New("http://"+d.addr, key)
	ts, err := other.Templates.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if strings.HasPrefix(x.TemplateID, "image-") {
			t.Errorf("another team lists the image template %s", x.TemplateID)
		}
	}
	if sb, err := other.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: tmpl}); err == nil {
		t.Errorf("another team created sandbox %s from the image template %s by name", sb.SandboxID, tmpl)
	} else if !strings.Contains(err.Error(), "404") && !strings.Contains(err.Error(), "not found") {
		t.Errorf("a create from the image template by name: %v, want not found", err)
	}
}

// noPasswordStored: the registry password is in no log line and no file
// of the metadata database.
func noPasswordStored(t *testing.T, d *daemon, pass string) {
	t.Helper()
	if d.log != nil && strings.Contains(d.log.String(), pass) {
		t.Errorf("the daemon's log holds the registry password")
	}
	dbs, _ := filepath.Glob(filepath.Join(d.dataDir, "*.db*"))
	if len(dbs) == 0 {
		t.Fatalf("no database in %s", d.dataDir)
	}
	for _, f := range dbs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(pass)) {
			t.Errorf("%s holds the registry password", f)
		}
	}
}
