package session

import (
	"testing"

	"github.com/warrenhq/warren/internal/storage"
)

func TestForkVerdict(t *testing.T) {
	changes := []storage.Change{
		{Path: "/w", Kind: storage.ChangeModified, Type: "dir"}, // entries changed: not counted
		{Path: "/w/a", Kind: storage.ChangeAdded, Type: "file", Size: 100},
		{Path: "/w/b", Kind: storage.ChangeModified, Type: "file", Size: 10, OldSize: 30},
		{Path: "/w/c", Kind: storage.ChangeRemoved, Type: "file", OldSize: 5},
		{Path: "/w/l", Kind: storage.ChangeAdded, Type: "symlink", Size: 9}, // a link weighs nothing
	}
	var v ForkVerdict
	v.count(changes)
	if v.Added != 2 || v.Modified != 1 || v.Removed != 1 || v.BytesChanged != 135 {
		t.Fatalf("counted %+v", v)
	}
	for _, c := range []struct {
		changes    int
		clean      bool
		divergence float64
		want       string
	}{
		{0, true, 0, "discard"},
		{3, true, 0.1, "merge"},
		{3, false, 0.1, "review"},
		{3, true, 0.81, "review"},
		{3, true, 0.8, "merge"},
	} {
		v := ForkVerdict{MergesCleanly: c.clean, Divergence: c.divergence}
		v.recommend(c.changes, DefaultDivergenceThreshold)
		if v.Recommendation != c.want {
			t.Errorf("%+v: %s, want %s", c, v.Recommendation, c.want)
		}
	}
}
