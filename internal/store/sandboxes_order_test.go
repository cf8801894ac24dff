package store

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// The listing E2B's SDK asks for: newest start first or oldest first,
// started after a time, of one template, and pages that neither repeat nor
// miss a sandbox while others are made and removed between them.
func TestListSandboxesOrderAndFilters(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	// Made in id order, started out of it: the order is by start, not by
	// creation or id.
	for i, sb := range []struct {
		id, tmpl string
		started  int
		state    SandboxState
	}{
		{"a", "base", 3, StateRunning},
		{"b", "py", 1, StatePaused},
		{"c", "base", 4, StateRunning},
		{"d", "py", 2, StateRunning},
		{"e", "base", 2, StatePaused}, // ties with d: broken by id
	} {
		rec := testSandbox(sb.id)
		rec.Template, rec.State = sb.tmpl, sb.state
		rec.CreatedAt = t0.Add(time.Duration(i) * time.Second)
		rec.StartedAt = t0.Add(time.Duration(sb.started) * time.Minute)
		if err := s.CreateSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		f    SandboxFilter
		want []string
	}{
		{"oldest first", SandboxFilter{}, []string{"b", "d", "e", "a", "c"}},
		{"newest first", SandboxFilter{Newest: true}, []string{"c", "a", "e", "d", "b"}},
		{"running and paused in one order", SandboxFilter{Newest: true, States: []SandboxState{StatePaused, StateRunning}}, []string{"c", "a", "e", "d", "b"}},
		{"template", SandboxFilter{Template: "py", Newest: true}, []string{"d", "b"}},
		{"unknown template", SandboxFilter{Template: "nope"}, nil},
		{"started after", SandboxFilter{StartedAfter: t0.Add(2 * time.Minute)}, []string{"a", "c"}},
		{"started after, newest", SandboxFilter{StartedAfter: t0.Add(90 * time.Second), Newest: true}, []string{"c", "a", "e", "d"}},
		{"newest after a cursor", SandboxFilter{Newest: true, After: "a"}, []string{"e", "d", "b"}},
		{"newest after e (tie with d)", SandboxFilter{Newest: true, After: "e"}, []string{"d", "b"}},
		{"oldest after d (tie with e)", SandboxFilter{After: "d"}, []string{"e", "a", "c"}},
		{"template+state+after", SandboxFilter{Template: "base", States: []SandboxState{StateRunning}, StartedAfter: t0}, []string{"a", "c"}},
	} {
		got, err := s.ListSandboxes(ctx, tc.f)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(idsOf(got), tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%s: got %v, want %v", tc.name, idsOf(got), tc.want)
		}
	}
}

// Paging with Cursor() in either order sees every sandbox that lives
// through the whole walk exactly once, in order, while sandboxes are made
// (they start now: newest first sees none of them, oldest first sees them
// at the end) and killed (on pages already read and pages not yet read)
// between pages.
func TestListSandboxesPagingWhileChanging(t *testing.T) {
	ctx := context.Background()
	for _, newest := range []bool{true, false} {
		t.Run(fmt.Sprintf("newest=%v", newest), func(t *testing.T) {
			s, _ := openTest(t)
			t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
			var stay []string
			for i := range 30 {
				sb := testSandbox(fmt.Sprintf("s%02d", i))
				sb.StartedAt = t0.Add(time.Duration(i/2) * time.Second) // pairs tie
				if err := s.CreateSandbox(ctx, sb); err != nil {
					t.Fatal(err)
				}
				if i%5 != 3 { // every fifth is killed during the walk
					stay = append(stay, sb.ID)
				}
			}
			if newest {
				slices.Reverse(stay)
			}
			var got []string
			after, made := "", 0
			for page := 0; page < 30; page++ {
				sbs, err := s.ListSandboxes(ctx, SandboxFilter{Limit: 4, After: after, Newest: newest})
				if err != nil {
					t.Fatal(err)
				}
				if len(sbs) == 0 {
					break
				}
				got = append(got, idsOf(sbs)...)
				after = sbs[len(sbs)-1].Cursor()
				// Between the first pages: one new sandbox, and the next
				// doomed one (read already or not) killed.
				if page < 6 {
					sb := testSandbox(fmt.Sprintf("new%02d", made))
					sb.StartedAt = t0.Add(time.Hour + time.Duration(made)*time.Second)
					if err := s.CreateSandbox(ctx, sb); err != nil {
						t.Fatal(err)
					}
					made++
				}
				if page*5+3 < 30 {
					if err := s.DeleteSandbox(ctx, fmt.Sprintf("s%02d", page*5+3)); err != nil {
						t.Fatal(err)
					}
				}
			}
			var old []string
			seen := map[string]int{}
			for _, id := range got {
				seen[id]++
				if seen[id] > 1 {
					t.Errorf("%s listed twice", id)
				}
				if id[0] == 's' && slices.Contains(stay, id) {
					old = append(old, id)
				}
			}
			if !reflect.DeepEqual(old, stay) {
				t.Errorf("the sandboxes there throughout, as paged: %v\nwant %v", old, stay)
			}
			if newest && made > 0 && slices.ContainsFunc(got, func(id string) bool { return id[0] == 'n' }) {
				t.Errorf("newest first listed a sandbox started after the walk began: %v", got)
			}
			if !newest && (len(got) < made || !reflect.DeepEqual(got[len(got)-made:], []string{"new00", "new01", "new02", "new03", "new04", "new05"})) {
				t.Errorf("oldest first missed the sandboxes started during the walk: %v", got)
			}
		})
	}
}
