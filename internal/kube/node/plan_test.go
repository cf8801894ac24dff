package node

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

func obj(name, uid string, labels map[string]string, sandboxID string) warrenv1.Sandbox {
	return warrenv1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Labels: labels, Generation: 1},
		Spec:       warrenv1.SandboxSpec{NodeName: "n1", Template: "bb"},
		Status:     warrenv1.SandboxStatus{SandboxID: sandboxID},
	}
}

func rec(id string, st store.SandboxState, md map[string]string) store.Sandbox {
	return store.Sandbox{ID: id, Team: "t1", Template: "bb", Runtime: "native", State: st, Metadata: md}
}

func never(string) bool { return false }

func deleting(o warrenv1.Sandbox) warrenv1.Sandbox {
	now := metav1.Now()
	o.DeletionTimestamp = &now
	return o
}

// Every case of the sandbox sync's plan: who is published, started,
// killed and released.
func TestPlanSync(t *testing.T) {
	mine := map[string]string{fleet.LabelNode: "n1"}
	kubeMD := map[string]string{MetaObjectUID: "u-kube"}
	objs := []warrenv1.Sandbox{
		obj("a", "u-a", mine, "a"),                                          // published, running
		obj("gone", "u-gone", mine, "gone"),                                 // its sandbox was destroyed: released
		obj("other", "u-other", nil, "other"),                               // not labelled as ours: left alone
		obj("new", "u-new", nil, ""),                                        // kubectl-made: started
		obj("kube", "u-kube", map[string]string{fleet.LabelTeam: "t1"}, ""), // its sandbox exists (uid): published, not started again
		deleting(obj("del", "u-del", mine, "del")),                          // deleted: its sandbox killed
		deleting(obj("delnew", "u-delnew", nil, "")),                        // deleted before a sandbox: released
		obj("busy", "u-busy", nil, ""),                                      // a create in flight: left alone
	}
	failed := obj("failed", "u-failed", nil, "")
	failed.Status.Phase, failed.Status.ObservedGeneration = warrenv1.SandboxFailed, 1
	retry := obj("retry", "u-retry", nil, "")
	retry.Status.Phase, retry.Status.ObservedGeneration, retry.Generation = warrenv1.SandboxFailed, 1, 2
	objs = append(objs, failed, retry)
	recs := []store.Sandbox{
		rec("a", store.StateRunning, nil),
		rec("fresh", store.StateRunning, nil),                                             // API-made, no object yet: published (created)
		rec("k2", store.StateRunning, kubeMD),                                             // made for object "kube"
		rec("del", store.StatePaused, nil),                                                // object being deleted
		rec("orphan", store.StateRunning, map[string]string{MetaObjectUID: "u-vanished"}), // its object is gone: killed
	}
	// Another team's sandbox naming the object in its metadata is not the
	// object's: it gets an object of its own.
	spoof := rec("spoof", store.StateRunning, kubeMD)
	spoof.Team = "t2"
	recs = append(recs, spoof)
	p := planSync("n1", objs, recs, func(uid string) bool { return uid == "u-busy" })

	pub := map[string]string{}
	for _, x := range p.publish {
		pub[x.Record.ID] = x.Object.Name
	}
	if len(pub) != 4 || pub["a"] != "a" || pub["fresh"] != "" || pub["k2"] != "kube" || pub["spoof"] != "" {
		t.Errorf("publish: %v", pub)
	}
	var started []string
	for _, o := range p.start {
		started = append(started, o.Name)
	}
	if len(started) != 2 || started[0] != "new" || started[1] != "retry" {
		t.Errorf("start: %v", started)
	}
	if len(p.kill) != 2 || p.kill[0].Record.ID != "del" || p.kill[0].Object == nil || p.kill[0].Object.Name != "del" ||
		p.kill[1].Record.ID != "orphan" || p.kill[1].Object != nil {
		t.Errorf("kill: %+v", p.kill)
	}
	var released []string
	for _, o := range p.release {
		released = append(released, o.Name)
	}
	if len(released) != 2 || released[0] != "gone" || released[1] != "delnew" {
		t.Errorf("release: %v", released)
	}
}

// An object found through its sandbox-id label (its status not written
// yet) is the record's, not a reason to make a second object.
func TestPlanSyncFindsObjectByLabel(t *testing.T) {
	o := obj("x", "u-x", map[string]string{fleet.LabelNode: "n1", fleet.LabelSandboxID: "x"}, "")
	p := planSync("n1", []warrenv1.Sandbox{o}, []store.Sandbox{rec("x", store.StateRunning, nil)}, never)
	if len(p.publish) != 1 || p.publish[0].Object.Name != "x" || len(p.start)+len(p.release)+len(p.kill) != 0 {
		t.Fatalf("%+v", p)
	}
}

func TestPhaseOf(t *testing.T) {
	for st, want := range map[store.SandboxState]warrenv1.SandboxPhase{
		store.StateCreating: warrenv1.SandboxCreating, store.StateRunning: warrenv1.SandboxRunning,
		store.StatePaused: warrenv1.SandboxPaused, store.StateHibernated: warrenv1.SandboxHibernated,
		store.StateStopped: warrenv1.SandboxStopped, store.StateFailed: warrenv1.SandboxFailed,
		store.StateDestroyed: warrenv1.SandboxDestroyed, "new-state": warrenv1.SandboxPending,
	} {
		if got := phaseOf(st); got != want {
			t.Errorf("%s: %s, want %s", st, got, want)
		}
	}
}

// The object of an API-made sandbox: named by its id, labelled, with the
// finalizer; a label value Kubernetes refuses is left out.
func TestNewObject(t *testing.T) {
	r := rec("abc", store.StateRunning, map[string]string{"k": "v"})
	r.MemoryBytes, r.CPUMillis = 256<<20, 500
	r.Team = "team-" // a valid team name, not a valid label value
	o := newObject("warren", "n1", r)
	if o.Name != "abc" || o.Namespace != "warren" || o.Spec.NodeName != "n1" || len(o.Finalizers) != 1 || o.Finalizers[0] != fleet.Finalizer {
		t.Fatalf("%+v", o.ObjectMeta)
	}
	want := map[string]string{fleet.LabelNode: "n1", fleet.LabelSandboxID: "abc", fleet.LabelTemplate: "bb", fleet.LabelOrigin: fleet.OriginAPI}
	if len(o.Labels) != len(want) {
		t.Fatalf("labels %v", o.Labels)
	}
	for k, v := range want {
		if o.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, o.Labels[k], v)
		}
	}
	if o.Spec.Limits == nil || o.Spec.Limits.Memory.Value() != 256<<20 || o.Spec.Limits.CPU.MilliValue() != 500 || o.Spec.Limits.Pids != nil {
		t.Errorf("limits %+v", o.Spec.Limits)
	}
}

// A status that has not changed compares equal after a round of the
// Ready condition, so the sync writes nothing on a quiet pass.
func TestDesiredStatus(t *testing.T) {
	r := rec("abc", store.StateRunning, nil)
	r.StartedAt = time.Now()
	r.Head = "snap1"
	st := desiredStatus(warrenv1.SandboxStatus{}, 3, "n1", "http://n1:3000", r)
	if st.Phase != warrenv1.SandboxRunning || st.SandboxID != "abc" || st.Node != "n1" || st.Endpoint != "http://n1:3000" ||
		st.LastSnapshot != "snap1" || st.ObservedGeneration != 3 || st.StartedAt == nil || len(st.Conditions) != 1 ||
		st.Conditions[0].Status != metav1.ConditionTrue {
		t.Fatalf("%+v", st)
	}
	// As read back from the API server: times to the second.
	readBack := st.DeepCopy()
	readBack.Conditions[0].LastTransitionTime = metav1.NewTime(readBack.Conditions[0].LastTransitionTime.Truncate(time.Second))
	again := desiredStatus(*readBack, 3, "n1", "http://n1:3000", r)
	if statusDiffers(*readBack, again) {
		t.Fatalf("unchanged status differs:\n%+v\n%+v", *readBack, again)
	}
	r.State = store.StatePaused
	paused := desiredStatus(*readBack, 3, "n1", "http://n1:3000", r)
	if !statusDiffers(*readBack, paused) || paused.Phase != warrenv1.SandboxPaused || paused.Conditions[0].Status != metav1.ConditionFalse {
		t.Fatalf("paused: %+v", paused)
	}
}

// A Sandbox object's spec as a create: team from the label (else admin),
// a snapshot instead of the template, limits, timeout, network, and the
// object's uid in the metadata.
func TestCreateRequest(t *testing.T) {
	o := obj("mine", "u-1", nil, "")
	o.Spec.Metadata = map[string]string{"k": "v"}
	if req := createRequest(o); req.Team != fleet.AdminTeam || req.Template != "bb" || req.Network != nil ||
		req.Metadata[MetaObjectUID] != "u-1" || req.Metadata[MetaObjectName] != "mine" || req.Metadata["k"] != "v" || req.Timeout != nil {
		t.Fatalf("%+v", req)
	}
	if _, ok := o.Spec.Metadata[MetaObjectUID]; ok {
		t.Fatal("the object's spec was written to")
	}
	yes := true
	mem, cpu, disk := resource.MustParse("1Gi"), resource.MustParse("1500m"), resource.MustParse("2Gi")
	pids := int64(64)
	o.Labels = map[string]string{fleet.LabelTeam: "t7"}
	o.Spec.FromSnapshot = "snap1"
	o.Spec.Timeout = &metav1.Duration{Duration: time.Minute}
	o.Spec.Limits = &warrenv1.SandboxLimits{Memory: &mem, CPU: &cpu, Disk: &disk, Pids: &pids}
	o.Spec.Network = &warrenv1.SandboxNetwork{AllowOut: []string{"1.1.1.1"}, AllowPublicTraffic: &yes}
	req := createRequest(o)
	if req.Team != "t7" || req.Template != "snap1" || *req.Timeout != time.Minute || req.Limits.MemoryBytes != 1<<30 ||
		req.Limits.CPUMillis != 1500 || req.Limits.Pids != 64 || req.DiskBytes != 2<<30 || req.Network == nil ||
		req.Network.AllowInternetAccess || len(req.Network.AllowOut) != 1 || !req.PublicPorts {
		t.Fatalf("%+v", req)
	}
}

func TestNodeStatus(t *testing.T) {
	rep := Report{Capacity: Resources{MemoryBytes: 8 << 30, CPUMillis: 4000, DiskBytes: 100 << 30, Sandboxes: 100},
		Used: Resources{MemoryBytes: 1 << 30, CPUMillis: 500, Sandboxes: 2}, Runtimes: []string{"native"},
		Templates: []string{"bb"}, SnapshotCount: 3, SnapshotBytes: 1000}
	st := nodeStatus(warrenv1.WarrenNodeStatus{}, rep, "http://n1", "v1", time.Now())
	if st.Capacity.Memory.Value() != 8<<30 || st.Capacity.CPU.MilliValue() != 4000 || st.Used.Sandboxes != 2 ||
		st.Snapshots.Count != 3 || st.Endpoint != "http://n1" || st.LastHeartbeat == nil || len(st.Conditions) != 1 ||
		st.Conditions[0].Status != metav1.ConditionTrue {
		t.Fatalf("%+v", st)
	}
}

// A node keeps its --pool pools and adds the SandboxPools that select it,
// the first of each template and network.
func TestPoolConfigs(t *testing.T) {
	base := []session.PoolConfig{{Template: "base", Min: 1}}
	ttl := metav1.Duration{Duration: time.Minute}
	pools := []warrenv1.SandboxPool{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: warrenv1.SandboxPoolSpec{Template: "bb", MinPerNode: 2, MaxPerNode: 4, TTL: &ttl}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dup"}, Spec: warrenv1.SandboxPoolSpec{Template: "bb", MinPerNode: 9}},
		{ObjectMeta: metav1.ObjectMeta{Name: "flag"}, Spec: warrenv1.SandboxPoolSpec{Template: "base", MinPerNode: 9}},
		{ObjectMeta: metav1.ObjectMeta{Name: "net"}, Spec: warrenv1.SandboxPoolSpec{Template: "bb", MinPerNode: 1, Network: true,
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}, Spec: warrenv1.SandboxPoolSpec{Template: "py", MinPerNode: 1,
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "b"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gv"}, Spec: warrenv1.SandboxPoolSpec{Template: "py", MinPerNode: 1, Runtime: "gvisor"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nat"}, Spec: warrenv1.SandboxPoolSpec{Template: "py", MinPerNode: 1, Runtime: "native"}},
	}
	got, selected, refused := poolConfigs(base, pools, map[string]string{"zone": "a"}, []string{"native"})
	want := []session.PoolConfig{{Template: "base", Min: 1}, {Template: "bb", Min: 2, Max: 4, TTL: time.Minute}, {Template: "bb", Min: 1, Network: true},
		{Template: "py", Min: 1, Runtime: "native"}}
	if !slices.Equal(got, want) {
		t.Fatalf("pools %+v", got)
	}
	if len(selected) != 3 || !selected["a"] || !selected["net"] || !selected["nat"] {
		t.Fatalf("selected %v", selected)
	}
	if len(refused) != 1 || !strings.Contains(refused["gv"], "runtime gvisor is not available on this node (it has: native)") {
		t.Fatalf("refused %v", refused)
	}
	// Runtimes unknown: any runtime is kept.
	if got, _, refused := poolConfigs(nil, pools[5:6], nil, nil); len(got) != 1 || got[0].Runtime != "gvisor" || len(refused) != 0 {
		t.Fatalf("no runtimes known: %+v %v", got, refused)
	}
}

// The node's line in a pool's status is added, updated, removed, and left
// alone when nothing changed.
func TestNodeLines(t *testing.T) {
	other := warrenv1.SandboxPoolNodeStatus{Node: "z", Ready: 1}
	lines, changed := nodeLines([]warrenv1.SandboxPoolNodeStatus{other}, "n1", &session.PoolStats{Ready: 2, Hits: 3})
	if !changed || len(lines) != 2 || lines[0].Node != "n1" || lines[0].Ready != 2 || lines[0].Hits != 3 {
		t.Fatalf("added: %+v", lines)
	}
	if _, changed := nodeLines(lines, "n1", &session.PoolStats{Ready: 2, Hits: 3}); changed {
		t.Fatal("unchanged line reported as changed")
	}
	lines, changed = nodeLines(lines, "n1", nil)
	if !changed || len(lines) != 1 || lines[0].Node != "z" {
		t.Fatalf("removed: %+v", lines)
	}
}

// A node back from being lost destroys its copy of a sandbox that lives
// on another node now, and leaves every other object of that name alone.
func TestStaleCopy(t *testing.T) {
	now := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	at := func(node string, labels map[string]string, id string) warrenv1.Sandbox {
		o := obj("s1", "u-s1", labels, id)
		o.Spec.NodeName = node
		return o
	}
	team := map[string]string{fleet.LabelTeam: "t1"}
	old := rec("s1", store.StatePaused, nil)
	old.UpdatedAt = now.Add(-time.Hour)
	adopted := rec("s1", store.StatePaused, map[string]string{session.MetaMovedFrom: "n2"})
	adopted.UpdatedAt = now.Add(-10 * time.Second)
	adoptedLong := adopted
	adoptedLong.UpdatedAt = now.Add(-time.Hour)
	for _, c := range []struct {
		name string
		o    warrenv1.Sandbox
		rec  store.Sandbox
		want bool
	}{
		{"restored on n2 while this node was lost", at("n2", team, "s1"), old, true},
		{"the object is this node's", at("n1", team, "s1"), old, false},
		{"the object is not placed", at("", team, "s1"), old, false},
		{"the object stands for another sandbox", at("n2", team, "s9"), old, false},
		{"the object is another team's", at("n2", map[string]string{fleet.LabelTeam: "t2"}, "s1"), old, false},
		{"just adopted from n2, repoint on its way", at("n2", team, "s1"), adopted, false},
		{"adopted from n2 long ago, back on n2 since", at("n2", team, "s1"), adoptedLong, true},
		{"adopted from n2, now on n3", at("n3", team, "s1"), adopted, true},
	} {
		if got := staleCopy("n1", c.o, c.rec, now); got != c.want {
			t.Errorf("%s: staleCopy = %v, want %v", c.name, got, c.want)
		}
	}
}

// The node's status writes keep the replica the controller recorded.
func TestDesiredStatusKeepsReplica(t *testing.T) {
	rep := &warrenv1.SandboxReplica{Node: "n2", Snapshot: "snap1", At: metav1.NowMicro()}
	st := desiredStatus(warrenv1.SandboxStatus{Phase: warrenv1.SandboxLost, Replica: rep}, 1, "n1", "http://n1", rec("s1", store.StatePaused, nil))
	if st.Phase != warrenv1.SandboxPaused || st.Replica != rep {
		t.Errorf("status of a reclaimed sandbox: phase %s replica %v, want Paused and the replica kept", st.Phase, st.Replica)
	}
}
