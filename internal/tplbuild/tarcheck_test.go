package tplbuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func tarOf(t *testing.T, gz bool, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	var zw *gzip.Writer
	tw := tar.NewWriter(&buf)
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	}
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = 1
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte("x"))
		}
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

func TestCheckTar(t *testing.T) {
	ok := []*tar.Header{
		{Name: "app/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "app/a.txt", Typeflag: tar.TypeReg, Mode: 0o640},
		{Name: "app/link", Typeflag: tar.TypeSymlink, Linkname: "a.txt"},
		{Name: "app/abs", Typeflag: tar.TypeSymlink, Linkname: "/etc/hostname"},
		{Name: "app/hard", Typeflag: tar.TypeLink, Linkname: "app/a.txt"},
	}
	for _, gz := range []bool{false, true} {
		got, err := checkTar(bytes.NewReader(tarOf(t, gz, ok...)))
		if err != nil || got != gz {
			t.Fatalf("gzip %v: a good archive: gzipped %v, %v", gz, got, err)
		}
	}
	bad := map[string]*tar.Header{
		"holds":            {Name: "../escape", Typeflag: tar.TypeReg},
		"absolute":         {Name: "/etc/passwd", Typeflag: tar.TypeReg},
		"character device": {Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
		"block device":     {Name: "sda", Typeflag: tar.TypeBlock},
		"fifo":             {Name: "p", Typeflag: tar.TypeFifo},
		"points outside":   {Name: "app/l", Typeflag: tar.TypeSymlink, Linkname: "../../etc"},
		"hard link target": {Name: "h", Typeflag: tar.TypeLink, Linkname: "../x"},
	}
	for want, h := range bad {
		_, err := checkTar(bytes.NewReader(tarOf(t, true, h)))
		if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want ErrInvalid saying %q", h.Name, err, want)
		}
	}
	if _, err := checkTar(strings.NewReader("not a tar at all, not at all")); !errdefs.IsInvalid(err) {
		t.Errorf("garbage: %v", err)
	}
}

func TestSpecValidate(t *testing.T) {
	good := Spec{FromTemplate: "base", Steps: []Step{
		{Type: "RUN", Args: []string{"echo hi", "root"}},
		{Type: "COPY", Args: []string{"app", "/app", "", "0755"}, FilesHash: strings.Repeat("ab", 32)},
		{Type: "ENV", Args: []string{"A", "1", "B_2", "x y"}},
		{Type: "WORKDIR", Args: []string{"/app"}},
		{Type: "USER", Args: []string{"user"}},
	}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]Spec{
		"unknown step type": {FromTemplate: "base", Steps: []Step{{Type: "FROB", Args: []string{"x"}}}},
		"takes 1 to 2":      {FromTemplate: "base", Steps: []Step{{Type: "RUN"}}},
		"key, value pairs":  {FromTemplate: "base", Steps: []Step{{Type: "ENV", Args: []string{"A", "1", "B"}}}},
		"not a variable":    {FromTemplate: "base", Steps: []Step{{Type: "ENV", Args: []string{"A-B", "1"}}}},
		"files hash":        {FromTemplate: "base", Steps: []Step{{Type: "COPY", Args: []string{"a", "/a"}, FilesHash: "../x"}}},
		"want octal":        {FromTemplate: "base", Steps: []Step{{Type: "COPY", Args: []string{"a", "/a", "", "999"}, FilesHash: strings.Repeat("ab", 32)}}},
		"both set":          {FromTemplate: "base", FromImage: "debian"},
		"NUL":               {FromTemplate: "base", Steps: []Step{{Type: "RUN", Args: []string{"a\x00b"}}}},
	} {
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("%s: got %v", what, err)
		}
	}
	if p, err := (Spec{FromImage: sdkDefaultImage}).parent(); p != "base" || err != nil {
		t.Errorf("the SDK's default image: %q %v", p, err)
	}
}

func TestParseNameAndKeys(t *testing.T) {
	for _, ok := range []string{"my-env", "my-env:v1", "a", "x_y.z:Prod-2"} {
		if _, _, err := ParseName(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Not A Name!", "UPPER", "-lead", "a:", "a:b:c", "a/b", strings.Repeat("a", 64)} {
		if _, _, err := ParseName(bad); !errdefs.IsInvalid(err) {
			t.Errorf("%q: got %v, want ErrInvalid", bad, err)
		}
	}
	a := Step{Type: "RUN", Args: []string{"make"}}
	forced := a
	forced.Force = true
	if stepKey("p", a) != stepKey("p", forced) {
		t.Error("force changes the key: a forced step could never be cached again")
	}
	if stepKey("p", a) == stepKey("q", a) {
		t.Error("the parent does not change the key")
	}
	c1 := Step{Type: "COPY", Args: []string{"a", "/a"}, FilesHash: "aa"}
	c2 := c1
	c2.FilesHash = "bb"
	if stepKey("p", c1) == stepKey("p", c2) {
		t.Error("the files do not change the key")
	}
}
