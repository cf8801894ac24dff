package tplbuild

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
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
