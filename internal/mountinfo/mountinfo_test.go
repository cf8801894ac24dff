package mountinfo

import (
	"slices"
	"testing"
)

func TestParseLine(t *testing.T) {
	m, ok := ParseLine(`36 35 98:0 /mnt1 /mnt\040two rw,noatime master:1 shared:2 - btrfs /dev/loop0 rw,ssd`)
	if !ok || m.MountPoint != "/mnt two" || m.FSType != "btrfs" || m.Source != "/dev/loop0" ||
		!slices.Equal(m.SuperOptions, []string{"rw", "ssd"}) {
		t.Fatalf("%+v %v", m, ok)
	}
	if _, ok := ParseLine("garbage"); ok {
		t.Fatal("garbage parsed")
	}
}

func TestReadFindsRoot(t *testing.T) {
	if _, ok, err := At("/"); err != nil || !ok {
		t.Fatalf("/ not found: %v", err)
	}
	under, err := Under("/")
	if err != nil || len(under) == 0 {
		t.Fatalf("Under(/): %v %v", under, err)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:   "/a b",
		`/tab\011`:  "/tab\t",
		`/back\134`: `/back\`,
		`/plain`:    "/plain",
		`/short\04`: `/short\04`,
		`/bad\9`:    `/bad\9`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
