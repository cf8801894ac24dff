package main

import (
	"os"
	"reflect"
	"testing"
	"time"
)

func TestParseKV(t *testing.T) {
	got, err := parseKV("meta", []string{"a=1", "b=x=y", "c=", "a=2"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "2", "b": "x=y", "c": ""}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got, err := parseKV("meta", nil); got != nil || err != nil {
		t.Fatalf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"novalue", "=v", ""} {
		if _, err := parseKV("env", []string{bad}); err == nil {
			t.Errorf("parseKV(%q) succeeded", bad)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                          {},
		"90m":                       now.Add(-90 * time.Minute),
		"2025-05-31T10:00:00+02:00": time.Date(2025, 5, 31, 8, 0, 0, 0, time.UTC),
	} {
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"0s", "-5m", "2025-06-01", "soon"} {
		if _, err := parseSince(bad, now); err == nil {
			t.Errorf("parseSince(%q) succeeded", bad)
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]os.FileMode{
		"": 0, "0644": 0o644, "755": 0o755, "0o600": 0o600, "4755": 0o755 | os.ModeSetuid, "1777": 0o777 | os.ModeSticky,
	} {
		got, err := parseMode(in)
		if err != nil || got != want {
			t.Errorf("parseMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"0999", "rw", "17777", "-1"} {
		if _, err := parseMode(bad); err == nil {
			t.Errorf("parseMode(%q) succeeded", bad)
		}
	}
}

func TestFmtBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1KiB", 1536: "1.5KiB", 512 << 20: "512MiB", 3 << 30: "3GiB", 5 << 40: "5TiB"} {
		if got := fmtBytes(n); got != want {
			t.Errorf("fmtBytes(%d) = %s, want %s", n, got, want)
		}
	}
}
