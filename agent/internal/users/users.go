// Package users resolves sandbox users and groups from the sandbox's own
// /etc/passwd and /etc/group. The agent is a static binary without cgo, and
// the files belong to the sandbox's tree, so it reads them itself rather
// than trusting a name service.
package users

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrUnknown is returned for a user name that /etc/passwd does not list.
var ErrUnknown = errors.New("unknown user")

// DefaultName is the conventional unprivileged user of a sandbox template.
const DefaultName = "user"

// User is one resolved account.
type User struct {
	Name   string
	UID    uint32
	GID    uint32
	Home   string
	Shell  string
	Groups []uint32 // supplementary groups, primary group included
}

// DB reads accounts from a passwd and a group file.
type DB struct {
	PasswdPath string
	GroupPath  string
	// DefaultsPath, when set, names a template defaults file (DefaultsPath).
	DefaultsPath string
}

// System is the database of the tree the agent runs in.
var System = DB{PasswdPath: "/etc/passwd", GroupPath: "/etc/group", DefaultsPath: DefaultsPath}

type passwdEntry struct {
	name        string
	uid, gid    uint32
	home, shell string
}

// Lookup resolves a user name or a numeric uid. An empty string resolves to
// the default user ("user" when it exists, else root). A numeric uid that
// /etc/passwd does not list is accepted with gid = uid and home "/", so a
// caller can still run as an arbitrary unprivileged id.
func (db DB) Lookup(nameOrUID string) (User, error) {
	if nameOrUID == "" {
		nameOrUID = db.DefaultUser()
	}
	entries, err := db.readPasswd()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return User{}, err
	}
	var found *passwdEntry
	uid, numErr := strconv.ParseUint(nameOrUID, 10, 32)
	for i := range entries {
		e := &entries[i]
		if e.name == nameOrUID || (numErr == nil && e.uid == uint32(uid)) {
			found = e
			break
		}
	}
	switch {
	case found != nil:
	case numErr == nil:
		return User{Name: nameOrUID, UID: uint32(uid), GID: uint32(uid), Home: "/", Shell: "/bin/sh", Groups: []uint32{uint32(uid)}}, nil
	case nameOrUID == "root":
		// A tree without /etc/passwd still has a root.
		return User{Name: "root", Home: "/root", Shell: "/bin/sh", Groups: []uint32{0}}, nil
	default:
		return User{}, fmt.Errorf("user %q is not in %s: %w", nameOrUID, db.PasswdPath, ErrUnknown)
	}
	u := User{Name: found.name, UID: found.uid, GID: found.gid, Home: found.home, Shell: found.shell}
	if u.Home == "" {
		u.Home = "/"
	}
	if u.Shell == "" {
		u.Shell = "/bin/sh"
	}
	groups, err := db.groupsOf(u.Name, u.GID)
	if err != nil {
		return User{}, err
	}
	u.Groups = groups
	return u, nil
}

// DefaultUser is the template's last USER when it recorded one, else
// "user" when the tree has one, else "root".
func (db DB) DefaultUser() string {
	entries, _ := db.readPasswd()
	if name, ok := db.templateUser(entries); ok {
		return name
	}
	for _, e := range entries {
		if e.name == DefaultName {
			return DefaultName
		}
	}
	return "root"
}

// Names maps uids and gids to names, for showing file owners.
func (db DB) Names() (uids, gids map[uint32]string) {
	uids, gids = map[uint32]string{}, map[uint32]string{}
	entries, _ := db.readPasswd()
	for _, e := range entries {
		if _, ok := uids[e.uid]; !ok {
			uids[e.uid] = e.name
		}
	}
	_ = scanColon(db.GroupPath, func(f []string) {
		if len(f) < 3 {
			return
		}
		if gid, err := strconv.ParseUint(f[2], 10, 32); err == nil {
			if _, ok := gids[uint32(gid)]; !ok {
				gids[uint32(gid)] = f[0]
			}
		}
	})
	return uids, gids
}

// Owners names the owners of files: built once per request from Names.
type Owners struct{ uids, gids map[uint32]string }

// Owners reads the names of the tree's users and groups.
func (db DB) Owners() Owners {
	u, g := db.Names()
	return Owners{uids: u, gids: g}
}

// User is uid's name, or the number when /etc/passwd does not list it.
func (o Owners) User(uid uint32) string { return nameOr(o.uids, uid) }

// Group is gid's name, or the number when /etc/group does not list it.
func (o Owners) Group(gid uint32) string { return nameOr(o.gids, gid) }

func nameOr(m map[uint32]string, id uint32) string {
	if n, ok := m[id]; ok {
		return n
	}
	return strconv.FormatUint(uint64(id), 10)
}

func (db DB) readPasswd() ([]passwdEntry, error) {
	var out []passwdEntry
	err := scanColon(db.PasswdPath, func(f []string) {
		if len(f) < 7 {
			return
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return
		}
		out = append(out, passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid), home: f[5], shell: f[6]})
	})
	return out, err
}

// groupsOf lists the primary gid and every group whose member list names the user.
func (db DB) groupsOf(name string, primary uint32) ([]uint32, error) {
	groups := []uint32{primary}
	err := scanColon(db.GroupPath, func(f []string) {
		if len(f) < 4 || f[3] == "" {
			return
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil || uint32(gid) == primary {
			return
		}
		for _, m := range strings.Split(f[3], ",") {
			if strings.TrimSpace(m) == name {
				groups = append(groups, uint32(gid))
				return
			}
		}
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return groups, nil
}

// Credential is what a command run as u is started with; nil when u is the
// agent itself and unprivileged, so an agent that is not root (in tests)
// can still run commands as itself.
func (u User) Credential() *syscall.Credential {
	if int(u.UID) == os.Geteuid() && int(u.GID) == os.Getegid() && os.Geteuid() != 0 {
		return nil
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}
