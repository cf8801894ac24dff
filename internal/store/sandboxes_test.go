package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestSandboxCRUD(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	created := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	want := Sandbox{
		ID: "sb1", Team: "acme", Template: "base", Runtime: "gvisor", State: StateCreating,
		Metadata:    map[string]string{"user": "alice", "turn": "3"},
		Env:         map[string]string{"TOKEN": "secret", "EMPTY": ""},
		MemoryBytes: 512 << 20, CPUMillis: 1500, Pids: 256,
		CreatedAt: created, StartedAt: created.Add(time.Second), EndAt: created.Add(time.Hour),
		Family: "fam1", ForkedFrom: "snap1", ParentSandbox: "sb0", Head: "snap1", Turn: 4, QuotaBytes: 1 << 30,
	}
	if err := s.CreateSandbox(ctx, want); err != nil {
		t.Fatalf("CreateSandbox: %v", err)
	}
	got, err := s.GetSandbox(ctx, "sb1")
	if err != nil {
		t.Fatalf("GetSandbox: %v", err)
	}
	if got.UpdatedAt.IsZero() || time.Since(got.UpdatedAt) > time.Minute {
		t.Errorf("UpdatedAt = %v, want about now", got.UpdatedAt)
	}
	want.UpdatedAt = got.UpdatedAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GetSandbox =\n%+v\nwant\n%+v", got, want)
	}

	err = s.CreateSandbox(ctx, want)
	if !errdefs.IsAlreadyExists(err) {
		t.Errorf("duplicate CreateSandbox: %v, want ErrAlreadyExists", err)
	}

	end := time.Now().Add(5 * time.Minute)
	if err := s.SetSandboxEndAt(ctx, "sb1", end); err != nil {
		t.Fatalf("SetSandboxEndAt: %v", err)
	}
	if got, _ := s.GetSandbox(ctx, "sb1"); !got.EndAt.Equal(end) {
		t.Errorf("EndAt = %v, want %v", got.EndAt, end)
	}
	if err := s.SetSandboxEndAt(ctx, "sb1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSandbox(ctx, "sb1"); !got.EndAt.IsZero() {
		t.Errorf("EndAt = %v after clearing, want zero", got.EndAt)
	}
	if err := s.SetSandboxEndAt(ctx, "nope", end); !errdefs.IsNotFound(err) {
		t.Errorf("SetSandboxEndAt of a missing sandbox: %v, want ErrNotFound", err)
	}

	if err := s.DeleteSandbox(ctx, "sb1"); err != nil {
		t.Fatalf("DeleteSandbox: %v", err)
	}
	if _, err := s.GetSandbox(ctx, "sb1"); !errdefs.IsNotFound(err) {
		t.Errorf("GetSandbox after delete: %v, want ErrNotFound", err)
	}
	if err := s.DeleteSandbox(ctx, "sb1"); !errdefs.IsNotFound(err) {
		t.Errorf("second DeleteSandbox: %v, want ErrNotFound", err)
	}
}

func TestSandboxDefaults(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	before := time.Now()
	if err := s.CreateSandbox(ctx, testSandbox("sb1")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "sb1")
	if err != nil {
		t.Fatal(err)
	}
	// A start time defaults to the creation time: it orders listings and
	// must never change once set.
	if got.CreatedAt.Before(before) || !got.StartedAt.Equal(got.CreatedAt) || !got.EndAt.IsZero() {
		t.Errorf("times = created %v started %v end %v", got.CreatedAt, got.StartedAt, got.EndAt)
	}
	if got.Metadata == nil || len(got.Metadata) != 0 || got.Env == nil {
		t.Errorf("nil maps should read back empty, got %#v %#v", got.Metadata, got.Env)
	}
}

func TestSandboxValidation(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for name, mut := range map[string]func(*Sandbox){
		"bad id":        func(sb *Sandbox) { sb.ID = "Bad/ID" },
		"empty team":    func(sb *Sandbox) { sb.Team = "" },
		"bad team":      func(sb *Sandbox) { sb.Team = "../x" },
		"bad template":  func(sb *Sandbox) { sb.Template = "a b" },
		"no runtime":    func(sb *Sandbox) { sb.Runtime = "" },
		"bad state":     func(sb *Sandbox) { sb.State = "zombie" },
		"negative mem":  func(sb *Sandbox) { sb.MemoryBytes = -1 },
		"bad family":    func(sb *Sandbox) { sb.Family = "a-b" },
		"bad forked":    func(sb *Sandbox) { sb.ForkedFrom = "../s" },
		"bad head":      func(sb *Sandbox) { sb.Head = "H" },
		"negative turn": func(sb *Sandbox) { sb.Turn = -1 },
		"neg quota":     func(sb *Sandbox) { sb.QuotaBytes = -1 },
		"bad utf8 key":  func(sb *Sandbox) { sb.Metadata = map[string]string{"\xff": "v"} },
		"bad utf8 env":  func(sb *Sandbox) { sb.Env = map[string]string{"K": "\xc3"} },
		"huge metadata": func(sb *Sandbox) { sb.Metadata = map[string]string{"k": strings.Repeat("x", maxMapBytes)} },
	} {
		sb := testSandbox("sb1")
		mut(&sb)
		if err := s.CreateSandbox(ctx, sb); !errdefs.IsInvalid(err) {
			t.Errorf("%s: CreateSandbox = %v, want ErrInvalid", name, err)
		}
	}
	if n, _ := s.CountSandboxes(ctx); n != 0 {
		t.Errorf("%d sandboxes stored after invalid creates", n)
	}
}

func TestUpdateSandboxStateCAS(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.CreateSandbox(ctx, testSandbox("sb1")); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateSandboxState(ctx, "sb1", []SandboxState{StateCreating}, StateRunning, ""); err != nil {
		t.Fatalf("creating→running: %v", err)
	}
	got, _ := s.GetSandbox(ctx, "sb1")
	if got.State != StateRunning || got.StartedAt.IsZero() {
		t.Errorf("after running: state %s started %v", got.State, got.StartedAt)
	}
	started := got.StartedAt

	// The same transition again loses the race: the sandbox is no longer creating.
	err := s.UpdateSandboxState(ctx, "sb1", []SandboxState{StateCreating}, StateRunning, "")
	if !errdefs.IsConflict(err) {
		t.Errorf("second creating→running: %v, want ErrConflict", err)
	}
	if err := s.UpdateSandboxState(ctx, "sb1", []SandboxState{StateRunning}, StatePaused, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateSandboxState(ctx, "sb1", []SandboxState{StatePaused}, StateRunning, ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSandbox(ctx, "sb1"); !got.StartedAt.Equal(started) {
		t.Errorf("resume moved StartedAt from %v to %v", started, got.StartedAt)
	}
	// nil from: any state.
	if err := s.UpdateSandboxState(ctx, "sb1", nil, StateFailed, "agent did not start: exec format error"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetSandbox(ctx, "sb1")
	if got.State != StateFailed || got.Reason != "agent did not start: exec format error" {
		t.Errorf("after failed: state %s reason %q", got.State, got.Reason)
	}
	if err := s.UpdateSandboxState(ctx, "sb1", nil, "zombie", ""); !errdefs.IsInvalid(err) {
		t.Errorf("unknown target state: %v, want ErrInvalid", err)
	}
	if err := s.UpdateSandboxState(ctx, "nope", nil, StateRunning, ""); !errdefs.IsNotFound(err) {
		t.Errorf("missing sandbox: %v, want ErrNotFound", err)
	}
}

func TestUpdateSandboxStateRace(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.CreateSandbox(ctx, testSandbox("sb1")); err != nil {
		t.Fatal(err)
	}
	const racers = 16
	results := make(chan error, racers)
	for range racers {
		go func() {
			results <- s.UpdateSandboxState(ctx, "sb1", []SandboxState{StateCreating}, StateRunning, "")
		}()
	}
	wins := 0
	for range racers {
		err := <-results
		switch {
		case err == nil:
			wins++
		case !errdefs.IsConflict(err):
			t.Errorf("racer: %v", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d racers won the CAS, want 1", wins)
	}
}

func idsOf(sbs []Sandbox) []string {
	out := make([]string, len(sbs))
	for i, sb := range sbs {
		out[i] = sb.ID
	}
	return out
}

func TestListSandboxesFilters(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for i, sb := range []Sandbox{
		{ID: "a", Team: "t1", State: StateRunning, Metadata: map[string]string{"env": "prod", "owner": "alice"}},
		{ID: "b", Team: "t1", State: StatePaused, Metadata: map[string]string{"env": "prod"}},
		{ID: "c", Team: "t2", State: StateRunning, Metadata: map[string]string{"env": "dev", "owner": "alice"}},
		{ID: "d", Team: "t2", State: StateDestroyed},
		{ID: "e", Team: "t1", State: StateRunning, Metadata: map[string]string{"owner": "prod"}},
	} {
		sb.Template, sb.Runtime, sb.CreatedAt = "base", "native", t0.Add(time.Duration(i)*time.Second)
		sb.StartedAt = sb.CreatedAt
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		f    SandboxFilter
		want []string
	}{
		{"all", SandboxFilter{}, []string{"a", "b", "c", "d", "e"}},
		{"team", SandboxFilter{Team: "t1"}, []string{"a", "b", "e"}},
		{"states", SandboxFilter{States: []SandboxState{StatePaused, StateDestroyed}}, []string{"b", "d"}},
		{"team+state", SandboxFilter{Team: "t2", States: []SandboxState{StateRunning}}, []string{"c"}},
		{"metadata one", SandboxFilter{Metadata: map[string]string{"env": "prod"}}, []string{"a", "b"}},
		{"metadata all", SandboxFilter{Metadata: map[string]string{"env": "prod", "owner": "alice"}}, []string{"a"}},
		{"metadata value not key", SandboxFilter{Metadata: map[string]string{"owner": "prod"}}, []string{"e"}},
		{"metadata missing", SandboxFilter{Metadata: map[string]string{"nope": "x"}}, nil},
		{"metadata empty value", SandboxFilter{Metadata: map[string]string{"env": ""}}, nil},
		{"limit", SandboxFilter{Limit: 2}, []string{"a", "b"}},
		{"after", SandboxFilter{After: "b", Limit: 2}, []string{"c", "d"}},
		{"after last", SandboxFilter{After: "e"}, nil},
		{"after+team", SandboxFilter{Team: "t1", After: "a"}, []string{"b", "e"}},
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
	if _, err := s.ListSandboxes(ctx, SandboxFilter{Limit: -1}); !errdefs.IsInvalid(err) {
		t.Errorf("negative limit: %v, want ErrInvalid", err)
	}
	if _, err := s.ListSandboxes(ctx, SandboxFilter{Team: "Bad Team"}); !errdefs.IsInvalid(err) {
		t.Errorf("bad team: %v, want ErrInvalid", err)
	}
	if _, err := s.ListSandboxes(ctx, SandboxFilter{After: "gone"}); !errdefs.IsInvalid(err) {
		t.Errorf("cursor at a missing sandbox: %v, want ErrInvalid", err)
	}
	if _, err := s.ListSandboxes(ctx, SandboxFilter{After: "x.y"}); !errdefs.IsInvalid(err) {
		t.Errorf("malformed cursor: %v, want ErrInvalid", err)
	}
	for states, want := range map[string]int{"": 5, "running": 3, "running,paused": 4} {
		var st []SandboxState
		if states != "" {
			for _, x := range strings.Split(states, ",") {
				st = append(st, SandboxState(x))
			}
		}
		if n, err := s.CountSandboxes(ctx, st...); err != nil || n != want {
			t.Errorf("CountSandboxes(%v) = %d, %v; want %d", st, n, err, want)
		}
	}
}

// Paging walks every sandbox exactly once in order, with ties on started_at
// broken by id, and a Cursor() survives deletion of the sandbox it names.
func TestListSandboxesPaging(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	var want []string
	for i := range 47 {
		sb := testSandbox(fmt.Sprintf("s%02d", i))
		sb.CreatedAt = t0.Add(time.Duration(i/3) * time.Second) // three share each timestamp
		sb.StartedAt = sb.CreatedAt
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		want = append(want, sb.ID)
	}
	for _, useCursor := range []bool{false, true} {
		var got []string
		after := ""
		for page := 0; ; page++ {
			sbs, err := s.ListSandboxes(ctx, SandboxFilter{Limit: 10, After: after})
			if err != nil {
				t.Fatal(err)
			}
			if len(sbs) == 0 {
				break
			}
			got = append(got, idsOf(sbs)...)
			last := sbs[len(sbs)-1]
			after = last.ID
			if useCursor {
				after = last.Cursor()
			}
			if page > 10 {
				t.Fatal("paging does not end")
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("cursor=%v: paged %v, want %v", useCursor, got, want)
		}
	}
	first, err := s.ListSandboxes(ctx, SandboxFilter{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	cursor := first[4].Cursor()
	if err := s.DeleteSandbox(ctx, first[4].ID); err != nil {
		t.Fatal(err)
	}
	next, err := s.ListSandboxes(ctx, SandboxFilter{Limit: 2, After: cursor})
	if err != nil || !reflect.DeepEqual(idsOf(next), want[5:7]) {
		t.Errorf("after a deleted sandbox's cursor: %v, %v; want %v", idsOf(next), err, want[5:7])
	}
}

// Metadata keys and values with quotes, JSON and SQL syntax, unicode and
// control characters round-trip and can be filtered on.
func TestMetadataRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	fixed := []string{
		"", `"`, `'`, `\`, `\"`, `'; DROP TABLE sandboxes; --`, `$.a`, `$."b"`, `{"x":1}`, "[1]",
		"null", "true", "123", "1e3", "héllo", "日本語", "emoji 🐇", "\u200b", "tab\there", "new\nline",
		"nul\x00byte", "\x7f", "<&>", "%_", "*", "a.b", "a[0]",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	runes := []rune(`a"'\{}[]$.:, ` + "\x00\x01\n\té日🐇\u2028")
	randStr := func() string {
		b := make([]rune, rng.IntN(12))
		for i := range b {
			b[i] = runes[rng.IntN(len(runes))]
		}
		return string(b)
	}
	for i := range 60 {
		md := map[string]string{}
		for j := range 4 {
			switch {
			case i < len(fixed):
				md[fixed[i]] = fixed[(i+j)%len(fixed)]
			default:
				md[randStr()] = randStr()
			}
		}
		id := fmt.Sprintf("m%d", i)
		sb := testSandbox(id)
		sb.Metadata, sb.Env = md, md
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatalf("create with metadata %q: %v", md, err)
		}
		got, err := s.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Metadata, md) || !reflect.DeepEqual(got.Env, md) {
			t.Errorf("metadata %q read back as %q / env %q", md, got.Metadata, got.Env)
		}
		list, err := s.ListSandboxes(ctx, SandboxFilter{Metadata: md})
		if err != nil {
			t.Fatalf("filter by %q: %v", md, err)
		}
		found := false
		for _, l := range list {
			if !containsAll(l.Metadata, md) {
				t.Errorf("filter by %q matched %s with %q", md, l.ID, l.Metadata)
			}
			found = found || l.ID == id
		}
		if !found {
			t.Errorf("filter by %q did not match %s", md, id)
		}
	}
}

func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// CreateSandboxRecorded writes the record, its edge and its event together,
// or none of them.
func TestCreateSandboxRecorded(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sb := Sandbox{ID: "sb1", Team: "acme", Template: "base", Runtime: "native", State: StateRunning, CreatedAt: at}
	edge := LineageEdge{Family: "sb1", Kind: "created-from", From: "sb1", To: "base", At: at}
	ev := Event{SandboxID: "sb1", Team: "acme", At: at, Kind: "created", To: StateRunning, Cause: "pool"}
	if err := s.CreateSandboxRecorded(ctx, sb, edge, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSandbox(ctx, "sb1"); err != nil {
		t.Fatal(err)
	}
	if edges, err := s.ListLineage(ctx, "sb1"); err != nil || len(edges) != 1 || edges[0].To != "base" {
		t.Fatalf("edges %+v, %v", edges, err)
	}
	if evs, err := s.ListEvents(ctx, "sb1", 0, 0); err != nil || len(evs) != 1 || evs[0].Kind != "created" {
		t.Fatalf("events %+v, %v", evs, err)
	}
	// A bad event: nothing of the second sandbox is written.
	sb.ID, edge.Family, edge.From, ev.SandboxID, ev.Kind = "sb2", "sb2", "sb2", "sb2", ""
	if err := s.CreateSandboxRecorded(ctx, sb, edge, ev); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("bad event: %v", err)
	}
	if _, err := s.GetSandbox(ctx, "sb2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("sb2 was created: %v", err)
	}
	if edges, _ := s.ListLineage(ctx, "sb2"); len(edges) != 0 {
		t.Fatalf("sb2's edge was written: %+v", edges)
	}
}
