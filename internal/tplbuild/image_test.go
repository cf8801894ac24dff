package tplbuild

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/template"
)

func TestSpecImage(t *testing.T) {
	login := json.RawMessage(`{"type": "registry", "username": "u", "password": "p"}`)
	ref, auth, err := Spec{FromImage: "reg.example:5000/x:1", FromImageRegistry: login}.image()
	if err != nil || ref != "reg.example:5000/x:1" || auth == nil || auth.Username != "u" || auth.Password != "p" {
		t.Fatalf("a registry login: %q %+v %v", ref, auth, err)
	}
	if p, err := (Spec{FromImage: "python:3.12"}).parent(); p != "" || err != nil {
		t.Errorf("an image is no template parent: %q %v", p, err)
	}
	for raw, want := range map[string]string{
		`{"type": "aws", "awsAccessKeyId": "a"}`:      `"aws" is not supported`,
		`{"type": "gcp", "serviceAccountJson": "{}"}`: `"gcp" is not supported`,
		`{"type": "registry", "username": "u"}`:       "username and password",
		`{"type": "ftp"}`:                             "want registry",
		`[1]`:                                         "fromImageRegistry",
	} {
		_, _, err := Spec{FromImage: "x:1", FromImageRegistry: json.RawMessage(raw)}.image()
		if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want 400 with %q", raw, err, want)
		}
	}
	for _, bad := range []string{"/var/lib/image", "./layout", "UPPER/case:x", "a::b"} {
		if err := (Spec{FromImage: bad}).Validate(); !errdefs.IsInvalid(err) {
			t.Errorf("fromImage %q: got %v, want ErrInvalid", bad, err)
		}
	}
	if err := (Spec{FromTemplate: "base", FromImageRegistry: login}).Validate(); !errdefs.IsInvalid(err) {
		t.Errorf("a login without an image: %v", err)
	}
}

func TestImageTemplateName(t *testing.T) {
	n := ImageTemplateName("sha256:" + strings.Repeat("ab", 32))
	if n != "image-"+strings.Repeat("ab", 20) || !IsImageTemplate(n) {
		t.Errorf("%s", n)
	}
	for _, not := range []string{"image-abc", "base", "image-" + strings.Repeat("x", 40), "my-image-" + strings.Repeat("a", 40)} {
		if IsImageTemplate(not) {
			t.Errorf("%s is no image template", not)
		}
	}
	if _, err := (&Service{}).RequestBuild(t.Context(), "team", n, nil); !errdefs.IsInvalid(err) {
		t.Errorf("a build named like an image template: %v", err)
	}
}

// fakeTemplates is the templates table for imageTemplate: a template
// exists once BuildImage made it.
type fakeTemplates struct {
	Store
	mu    sync.Mutex
	names map[string]bool
}

func (f *fakeTemplates) GetTemplate(_ context.Context, name string) (store.Template, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.names[name] {
		return store.Template{Name: name}, nil
	}
	return store.Template{}, errdefs.ErrNotFound
}

func TestImageTemplateOncePerDigest(t *testing.T) {
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "p" {
			w.Header().Set("WWW-Authenticate", `Basic realm="t"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	login := &template.RegistryAuth{Username: "u", Password: "p"}
	ref := strings.TrimPrefix(srv.URL, "http://") + "/x:1"
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := name.ParseReference(ref)
	if err := remote.Write(r, img, remote.WithAuth(&authn.Basic{Username: "u", Password: "p"})); err != nil {
		t.Fatal(err)
	}
	st := &fakeTemplates{names: map[string]bool{}}
	var pulls atomic.Int32
	s := New(Config{Store: st, BuildImage: func(_ context.Context, n string, src template.Source, _ io.Writer) error {
		pulls.Add(1)
		if src.ImageAuth != login || !strings.Contains(src.Image, "@sha256:") {
			t.Errorf("pulled %s with %+v: want the digest with the build's login", src.Image, src.ImageAuth)
		}
		time.Sleep(50 * time.Millisecond) // a pull takes a while: the other build waits for it
		st.mu.Lock()
		st.names[n] = true
		st.mu.Unlock()
		return nil
	}})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			tmpl, key, err := s.imageTemplate(t.Context(), ref, login, &buildLog{})
			if err != nil || !IsImageTemplate(tmpl) || !strings.HasPrefix(key, "image:sha256:") {
				t.Errorf("%s %s %v", tmpl, key, err)
			}
		})
	}
	wg.Wait()
	if n := pulls.Load(); n != 1 {
		t.Errorf("three builds of one digest pulled it %d times, want once", n)
	}
	_, _, err = s.imageTemplate(t.Context(), ref, &template.RegistryAuth{Username: "u", Password: "wrong"}, &buildLog{})
	if !errors.Is(err, errdefs.ErrPermissionDenied) || strings.Contains(err.Error(), "wrong") {
		t.Errorf("a wrong password: %v, want permission denied without the password", err)
	}
}
