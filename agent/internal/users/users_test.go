package users

import (
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func testDB(t *testing.T, withUser bool) DB {
	t.Helper()
	dir := t.TempDir()
	passwd := "root:x:0:0:root:/root:/bin/bash\n# comment\nbroken:line\n"
	if withUser {
		passwd += "user:x:1000:1000::/home/user:/bin/bash\n"
	}
	group := "root:x:0:\nuser:x:1000:\nsudo:x:27:alice,user\ndocker:x:999:user\nother:x:50:alice\n"
	db := DB{PasswdPath: filepath.Join(dir, "passwd"), GroupPath: filepath.Join(dir, "group")}
	if err := os.WriteFile(db.PasswdPath, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db.GroupPath, []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestLookup(t *testing.T) {
	db := testDB(t, true)
	u, err := db.Lookup("user")
	if err != nil {
		t.Fatal(err)
	}
	if u.UID != 1000 || u.GID != 1000 || u.Home != "/home/user" || !slices.Equal(u.Groups, []uint32{1000, 27, 999}) {
		t.Fatalf("unexpected user: %+v", u)
	}
	byUID, err := db.Lookup("1000")
	if err != nil || byUID.Name != "user" {
		t.Fatalf("lookup by uid: %+v %v", byUID, err)
	}
	def, err := db.Lookup("")
	if err != nil || def.Name != "user" {
		t.Fatalf("default: %+v %v", def, err)
	}
	unlisted, err := db.Lookup("4242")
	if err != nil || unlisted.UID != 4242 || unlisted.GID != 4242 {
		t.Fatalf("numeric unlisted: %+v %v", unlisted, err)
	}
	if _, err := db.Lookup("nobody-here"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("want ErrUnknown, got %v", err)
	}
}

func TestDefaultIsRootWithoutUser(t *testing.T) {
	db := testDB(t, false)
	if got := db.DefaultUser(); got != "root" {
		t.Fatalf("default user = %q, want root", got)
	}
	u, err := db.Lookup("")
	if err != nil || u.UID != 0 {
		t.Fatalf("%+v %v", u, err)
	}
	uids, gids := db.Names()
	if uids[0] != "root" || gids[27] != "sudo" {
		t.Fatalf("names: %v %v", uids, gids)
	}
}

func TestCacheSeesEdits(t *testing.T) {
	db := testDB(t, false)
	if db.DefaultUser() != "root" {
		t.Fatal("want root before the edit")
	}
	f, err := os.OpenFile(db.PasswdPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("user:x:1000:1000::/home/user:/bin/sh\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := db.DefaultUser(); got != "user" {
		t.Fatalf("after adding user, default = %q", got)
	}
}

func TestNameFromRequest(t *testing.T) {
	for _, tc := range []struct {
		auth, query, want string
		bad               bool
	}{
		{want: ""},
		{auth: "Basic " + base64.StdEncoding.EncodeToString([]byte("root:")), want: "root"},
		{auth: "basic " + base64.StdEncoding.EncodeToString([]byte("user:")), want: "user"},
		{auth: "Basic " + base64.StdEncoding.EncodeToString([]byte("user:")), query: "root", want: "root"},
		{auth: "Bearer x", bad: true},
		{auth: "Basic %%%", bad: true},
	} {
		r := httptest.NewRequest("GET", "/files?username="+tc.query, nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		got, err := NameFromRequest(r)
		if tc.bad {
			if !errors.Is(err, ErrBadAuthorization) {
				t.Errorf("%q: err = %v, want ErrBadAuthorization", tc.auth, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q/%q: got %q, %v; want %q", tc.auth, tc.query, got, err, tc.want)
		}
	}
}
