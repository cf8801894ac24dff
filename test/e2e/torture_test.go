package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/network/fakenet"
)

// tortureScale is how hard the crash-consistency torture goes: the short
// version runs in `make test`; WARREN_TORTURE=long (`make torture`) is the
// issue's 50 clients and 20 kills.
func tortureScale() (clients, kills int) {
	if os.Getenv("WARREN_TORTURE") == "long" {
		return 50, 20
	}
	clients, kills = 8, 3
	if v, err := strconv.Atoi(os.Getenv("WARREN_TORTURE_KILLS")); err == nil && v > 0 {
		kills = v
	}
	return clients, kills
}

// tortureStats counts what the clients did and saw.
type tortureStats struct {
	ops, errs atomic.Int64
	mu        sync.Mutex
	byOp      map[string]int
	errByOp   map[string]int
	samples   map[string]int // "op status message" → count
	ids       sync.Map       // every sandbox id a client was given
	networked sync.Map       // the ids of sandboxes with a network
}

// ours filters cgroup ids to those of sandboxes this test made (other
// packages' tests run beside it and make cgroups of their own).
func (s *tortureStats) ours(ids []string) []string {
	var out []string
	for _, id := range ids {
		if _, ok := s.ids.Load(id); ok {
			out = append(out, id)
		}
	}
	return out
}

func (s *tortureStats) done(op string, err error) {
	s.ops.Add(1)
	s.mu.Lock()
	s.byOp[op]++
	if err != nil {
		s.errs.Add(1)
		s.errByOp[op]++
		msg := err.Error()
		if len(msg) > 90 {
			msg = msg[:90]
		}
		s.samples[fmt.Sprintf("%s %d %s", op, client.StatusCode(err), msg)]++
	}
	s.mu.Unlock()
}

// report lists the errors by kind, most frequent first.
func (s *tortureStats) report() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range s.samples {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	var b strings.Builder
	for i, e := range all {
		if i == 15 {
			break
		}
		fmt.Fprintf(&b, "\n  %5d × %s", e.n, e.k)
	}
	return b.String()
}

// torturePolicies are the egress policies networked sandboxes are created
// with and switched between: each opens at most the fake internet's first
// two servers (documentation addresses inside namespaces the test made),
// and denies everything else.
var torturePolicies = []client.NetworkPolicy{
	{AllowOut: []string{fakenet.Servers[0]}},
	{AllowOut: []string{fakenet.Servers[1]}},
	{AllowOut: []string{fakenet.Servers[0], fakenet.Servers[1]}},
	{AllowOut: []string{fakenet.Servers[0], fakenet.Servers[1]}, DenyOut: []string{fakenet.Servers[1]}},
	{},
}

// tortureClient is one agent-like client: it creates sandboxes, runs
// commands, snapshots, forks, rolls back and deletes, at random, until ctx
// ends. A networked client creates its sandboxes with a network, and in
// sandboxes that have one its commands connect out and its policy changes
// live. Errors are expected (the daemon is killed under it); the checks
// come after each restart.
func tortureClient(ctx context.Context, c *client.Client, seed uint64, networked bool, st *tortureStats, mine []string, snaps map[string][]string) {
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	hasNet := func(id string) bool { _, ok := st.networked.Load(id); return ok }
	for ctx.Err() == nil {
		opCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		var op string
		var err error
		r := rng.IntN(100)
		if len(mine) >= 5 && r < 15 {
			r += 75 // enough of them: a delete instead of a create
		}
		switch {
		case len(mine) < 2 || r < 15:
			op = "create"
			in := client.NewSandbox{TemplateID: "bb", Timeout: ptr(int64(0))}
			if networked {
				// (Not the last policy: a create with empty lists gets no
				// network at all.)
				op = "create-networked"
				p := torturePolicies[rng.IntN(len(torturePolicies)-1)]
				in.Network = &client.Network{AllowOut: p.AllowOut, DenyOut: p.DenyOut}
			}
			var sb client.Sandbox
			if sb, err = c.Sandboxes.Create(opCtx, in); err == nil {
				mine = append(mine, sb.SandboxID)
				st.ids.Store(sb.SandboxID, true)
				if networked {
					st.networked.Store(sb.SandboxID, true)
				}
			}
		case r < 33:
			op = "exec"
			id := pick(mine)
			cmd := "echo $$ > /workspace/last; cat /workspace/last"
			if hasNet(id) {
				// A connection out, allowed or refused by the policy of the
				// moment; the check after the restart says which it must be.
				cmd = "timeout 3 wget -q -O /dev/null http://" + fakenet.Servers[rng.IntN(2)] + "/; " + cmd
			}
			_, err = c.Commands.ExecWait(opCtx, id, sh(cmd))
		case r < 38:
			op = "network"
			var withNet []string
			for _, id := range mine {
				if hasNet(id) {
					withNet = append(withNet, id)
				}
			}
			if len(withNet) > 0 {
				err = c.Network.Update(opCtx, pick(withNet), torturePolicies[rng.IntN(len(torturePolicies))])
			} else {
				op = "exec"
				_, err = c.Commands.ExecWait(opCtx, pick(mine), sh("true"))
			}
		case r < 45:
			// Pause then resume: a kill between the two leaves a paused
			// sandbox, which must resume after the restart.
			op = "pause"
			id := pick(mine)
			if err = c.Lifecycle.Pause(opCtx, id); err == nil {
				st.done(op, nil)
				op = "resume"
				_, err = c.Lifecycle.Resume(opCtx, id)
			}
		case r < 60:
			op = "snapshot"
			id := pick(mine)
			var s client.Snapshot
			if s, err = c.Snapshots.Create(opCtx, id, client.NewSnapshot{}); err == nil {
				snaps[id] = append(snaps[id], s.SnapshotID)
			}
		case r < 70:
			op = "fork"
			id := pick(mine)
			var res []client.ForkResult
			in := client.ForkRequest{Timeout: ptr(int64(0))}
			if s := snaps[id]; len(s) > 0 {
				in.SnapshotID = pick(s)
			}
			if res, err = c.Snapshots.Fork(opCtx, id, in); err == nil && len(res) == 1 && res[0].Sandbox != nil {
				mine = append(mine, res[0].Sandbox.SandboxID)
				st.ids.Store(res[0].Sandbox.SandboxID, true)
				if hasNet(id) {
					// A fork keeps its parent's network policy.
					st.networked.Store(res[0].Sandbox.SandboxID, true)
				}
			}
		case r < 80:
			op = "rollback"
			id := pick(mine)
			if s := snaps[id]; len(s) > 0 {
				_, err = c.Snapshots.Rollback(opCtx, id, client.RollbackRequest{SnapshotID: pick(s), Force: true})
			} else {
				op = "exec"
				_, err = c.Commands.ExecWait(opCtx, id, sh("true"))
			}
		case r < 90:
			op = "delete"
			i := rng.IntN(len(mine))
			if err = c.Sandboxes.Delete(opCtx, mine[i]); err == nil || client.StatusCode(err) == 404 {
				delete(snaps, mine[i])
				mine = append(mine[:i], mine[i+1:]...)
			}
		default:
			op = "delete-snapshot"
			id := pick(mine)
			if s := snaps[id]; len(s) > 0 {
				j := rng.IntN(len(s))
				if err = c.Snapshots.Delete(opCtx, s[j]); err == nil || client.StatusCode(err) == 404 {
					snaps[id] = append(s[:j], s[j+1:]...)
				}
			}
		}
		cancel()
		if ctx.Err() == nil {
			st.done(op, err)
		}
		if err != nil {
			// The daemon may be gone: do not spin.
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// tortureHost is the daemon under torture and the fake host its sandboxes'
// networks live on (see networkDaemon): everything on that host is this
// daemon's, so its networks can be counted exactly while other daemons run
// on the machine.
type tortureHost struct {
	*daemon
	in     *fakenet.Internet
	runDir string
}

// TestTortureCrashConsistency: clients create, exec, snapshot, fork, roll
// back, delete and (every third client) give sandboxes a network and change
// its policy while the daemon is kill -9ed at random moments. After every
// restart: no sandbox is left "creating", every running sandbox answers,
// every networked one has its address to itself and reaches exactly what
// its recorded policy allows, every ready snapshot has its volume, and
// nothing exists on the host (volume, runtime state, socket dir, cgroup,
// mount, network namespace, veth, nftables chain, set or map entry) that
// no live record names. At the end everything is deleted and nothing is
// left at all.
func TestTortureCrashConsistency(t *testing.T) {
	// Serial: it counts the host's mounts, loop devices and cgroups before and after.
	clients, kills := tortureScale()
	nd, in, runDir := networkDaemon(t, "--max-sandboxes", strconv.Itoa(clients*4+20), "--default-timeout", "0")
	d := tortureHost{daemon: nd, in: in, runDir: runDir}
	st := &tortureStats{byOp: map[string]int{}, errByOp: map[string]int{}, samples: map[string]int{}}
	before := d.counts(t, st)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := 1; round <= kills; round++ {
		c := d.client()
		mine, snaps := shareOut(t, c, clients, st)
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				tortureClient(ctx, c, uint64(round*1000+i), i%3 == 0, st, mine[i], snaps[i])
			}(i)
		}
		// Kill at a random moment, in the middle of whatever is going on.
		time.Sleep(time.Duration(800+rng.IntN(2500)) * time.Millisecond)
		d.stop(syscall.SIGKILL)
		stop()
		wg.Wait()
		d.start()
		checkConsistent(t, d, round, st)
		if t.Failed() {
			break
		}
	}
	t.Logf("torture: %d clients, %d kills survived, %d operations (%d errors, most while the daemon was down): %v; errors %v; by kind:%s",
		clients, kills, st.ops.Load(), st.errs.Load(), st.byOp, st.errByOp, st.report())

	// Delete everything; nothing of any of it may remain.
	c := d.client()
	ctx := ctxT(t, 5*time.Minute)
	all := listAll(t, ctx, c)
	for _, sb := range all {
		if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil && client.StatusCode(err) != 404 {
			t.Errorf("delete %s (%s): %v", sb.SandboxID, sb.State, err)
		}
	}
	for _, s := range listAllSnapshots(t, ctx, c) {
		if err := c.Snapshots.Delete(ctx, s.SnapshotID); err != nil && client.StatusCode(err) != 404 {
			t.Errorf("delete snapshot %s: %v", s.SnapshotID, err)
		}
	}
	// Snapshot volumes go in the background; a restart reconciles the rest.
	d.stop(syscall.SIGTERM)
	d.start()
	// Sandboxes made by creates the kill cut short are only in records
	// (failed) or nowhere: every id any record ever named counts.
	for _, sb := range all {
		st.ids.Store(sb.SandboxID, true)
	}
	// A namespace dies in a kernel worker after its last user let go:
	// give the counts a moment to settle.
	after := d.counts(t, st)
	for deadline := time.Now().Add(10 * time.Second); after != before && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		after = d.counts(t, st)
	}
	if after != before {
		t.Errorf("leaks after deleting everything: before %+v, after %+v%s", before, after, d.netDump(t))
	} else {
		t.Logf("host resources before and after: %+v", after)
	}
	for _, kind := range []string{"sandboxes", "snapshots"} {
		if left := dirNames(filepath.Join(d.dataDir, "pool", "volumes", kind)); len(left) > 0 {
			t.Errorf("%s volumes left: %v", kind, left)
		}
	}
	for _, dir := range []string{"run", "runtime/native", "procs", "sandbox-logs", "memory"} {
		if left := dirNames(filepath.Join(d.dataDir, dir)); len(left) > 0 {
			t.Errorf("%s left: %v", dir, left)
		}
	}
}

// shareOut deals the running sandboxes the last round left, and their
// snapshots, among the clients of the next.
func shareOut(t *testing.T, c *client.Client, clients int, st *tortureStats) ([][]string, []map[string][]string) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	mine := make([][]string, clients)
	snaps := make([]map[string][]string, clients)
	owner := map[string]int{}
	for i := range snaps {
		snaps[i] = map[string][]string{}
	}
	for i, sb := range listAll(t, ctx, c) {
		if sb.State == "running" {
			owner[sb.SandboxID] = i % clients
			mine[i%clients] = append(mine[i%clients], sb.SandboxID)
		}
		if sb.Network != nil {
			// Also those whose create the kill answered with an error.
			st.networked.Store(sb.SandboxID, true)
		}
	}
	for _, s := range listAllSnapshots(t, ctx, c) {
		if i, ok := owner[s.SandboxID]; ok {
			snaps[i][s.SandboxID] = append(snaps[i][s.SandboxID], s.SnapshotID)
		}
	}
	return mine, snaps
}

// checkConsistent checks the invariants after a restart.
func checkConsistent(t *testing.T, d tortureHost, round int, st *tortureStats) {
	t.Helper()
	ctx := ctxT(t, 3*time.Minute)
	c := d.client()
	all := listAll(t, ctx, c)
	known := map[string]string{}
	var running []string
	nets := map[string]*client.Network{} // the networked sandboxes that run, and their policies
	for _, sb := range all {
		known[sb.SandboxID] = sb.State
		st.ids.Store(sb.SandboxID, true)
		switch sb.State {
		case "creating":
			t.Errorf("round %d: sandbox %s is still creating after a restart", round, sb.SandboxID)
		case "running":
			running = append(running, sb.SandboxID)
		case "paused":
			// A pause the kill caught before its resume: it must resume.
			if _, err := c.Lifecycle.Resume(ctx, sb.SandboxID); err != nil {
				t.Errorf("round %d: resume paused sandbox %s after a restart: %v", round, sb.SandboxID, err)
				continue
			}
			known[sb.SandboxID] = "running"
			running = append(running, sb.SandboxID)
		}
		if known[sb.SandboxID] == "running" && sb.Network != nil {
			st.networked.Store(sb.SandboxID, true)
			nets[sb.SandboxID] = sb.Network
			if sb.AllowInternetAccess != nil && *sb.AllowInternetAccess {
				t.Errorf("round %d: sandbox %s has internet access, which no client gave it", round, sb.SandboxID)
			}
		}
	}
	// Every running sandbox works; a networked one has an address and
	// reaches what its recorded policy allows, and only that: the rules a
	// restart adopted are the record's, whatever change the kill cut short.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var broken []string
	addrs := map[string]string{}
	sem := make(chan struct{}, 8)
	for _, id := range running {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pol := nets[id]
			cmd := "echo alive"
			if pol != nil {
				cmd += "; ip -4 -o addr show dev eth0"
				for _, srv := range fakenet.Servers[:2] {
					cmd += fmt.Sprintf("; timeout 5 wget -q -O /dev/null http://%s/ && echo reach %s", srv, srv)
				}
			}
			res, err := c.Commands.ExecWait(ctx, id, sh(cmd))
			mu.Lock()
			defer mu.Unlock()
			if err != nil || !strings.HasPrefix(res.Stdout, "alive\n") {
				broken = append(broken, fmt.Sprintf("%s: %+v %v", id, res, err))
				return
			}
			if pol == nil {
				if res.Stdout != "alive\n" {
					broken = append(broken, fmt.Sprintf("%s: %+v", id, res))
				}
				return
			}
			addr := ""
			for _, f := range strings.Fields(res.Stdout) {
				if p, err := netip.ParsePrefix(f); err == nil {
					addr = p.Addr().String()
				}
			}
			if addr == "" {
				broken = append(broken, fmt.Sprintf("%s: no address on eth0: %q", id, res.Stdout))
			} else if other, ok := addrs[addr]; ok {
				broken = append(broken, fmt.Sprintf("%s and %s share the address %s", id, other, addr))
			} else {
				addrs[addr] = id
			}
			for _, srv := range fakenet.Servers[:2] {
				want := !slices.Contains(pol.DenyOut, srv) && slices.Contains(pol.AllowOut, srv)
				if got := strings.Contains(res.Stdout, "reach "+srv+"\n"); got != want {
					broken = append(broken, fmt.Sprintf("%s with policy allow %v deny %v reaches %s: %v, want %v (%q)",
						id, pol.AllowOut, pol.DenyOut, srv, got, want, res.Stdout))
				}
			}
		}(id)
	}
	wg.Wait()
	if len(broken) > 0 {
		t.Errorf("round %d: running sandboxes that do not answer, or not as their policy says:\n%s", round, strings.Join(broken, "\n"))
	}
	// The fake host holds one veth, namespace mount, live namespace, chain,
	// map entry and three sets for each networked sandbox that runs, and
	// nothing else. (All of them are this daemon's: the host is ours.)
	want := fakenet.Counts{Veths: len(nets), Mounts: len(nets), Chains: len(nets), Sets: 3 * len(nets), MapElems: len(nets)}
	got, err := d.in.Count(d.runDir)
	if err != nil {
		t.Fatal(err)
	}
	ns := d.peerNamespaces(t, len(nets))
	if got != want || ns != len(nets) {
		t.Errorf("round %d: %d networked sandboxes run, and the host has %+v and %d of their namespaces alive; want %+v%s",
			round, len(nets), got, ns, want, d.netDump(t))
	}
	// Every ready snapshot has its volume; every snapshot volume a record.
	snaps := listAllSnapshots(t, ctx, c)
	ready := map[string]bool{}
	for _, s := range snaps {
		ready[s.SnapshotID] = true
		if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "volumes", "snapshots", s.SnapshotID)); err != nil && s.State == "ready" {
			t.Errorf("round %d: ready snapshot %s has no volume: %v", round, s.SnapshotID, err)
		}
	}
	for _, name := range dirNames(filepath.Join(d.dataDir, "pool", "volumes", "snapshots")) {
		if !ready[name] {
			t.Errorf("round %d: snapshot volume %s has no usable record", round, name)
		}
	}
	// Every btrfs subvolume of the pool is a volume some record names (or
	// a template's): a crash leaves no unnamed subvolume behind.
	for _, path := range poolSubvolumes(t, d.dataDir) {
		kind, name := filepath.Base(filepath.Dir(path)), filepath.Base(path)
		switch {
		case kind == "templates":
		case kind == "sandboxes" && known[name] != "":
		case kind == "snapshots" && ready[name]:
		default:
			t.Errorf("round %d: subvolume %s belongs to no record", round, path)
		}
	}
	// Nothing of a sandbox no record names: volumes, runtime state,
	// socket dirs. Live resources (runtime state, cgroups) only for live
	// sandboxes.
	for _, dir := range []string{"pool/volumes/sandboxes", "run", "runtime/native"} {
		for _, name := range dirNames(filepath.Join(d.dataDir, dir)) {
			state, ok := known[name]
			switch {
			case !ok:
				t.Errorf("round %d: %s/%s belongs to no sandbox record", round, dir, name)
			case dir == "runtime/native" && state != "running" && state != "paused":
				t.Errorf("round %d: runtime state of %s sandbox %s", round, state, name)
			}
		}
	}
	for _, id := range st.ours(d.sandboxCgroups()) {
		if state := known[id]; state != "running" && state != "paused" {
			t.Errorf("round %d: cgroup of sandbox %s, which is %q", round, id, state)
		}
	}
	// A listed snapshot works: a sandbox made from it runs (a few, at
	// random: each costs a sandbox start).
	usable := 0
	for _, i := range rand.Perm(len(snaps)) {
		if usable == 3 {
			break
		}
		s := snaps[i]
		if s.State != "ready" {
			continue
		}
		usable++
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: s.SnapshotID, Timeout: ptr(int64(0))})
		if err != nil {
			t.Errorf("round %d: create from listed snapshot %s: %v", round, s.SnapshotID, err)
			continue
		}
		st.ids.Store(sb.SandboxID, true)
		if res, err := c.Commands.ExecWait(ctx, sb.SandboxID, sh("test -d /workspace && echo alive")); err != nil || res.Stdout != "alive\n" {
			t.Errorf("round %d: sandbox from snapshot %s: %+v %v", round, s.SnapshotID, res, err)
		}
		if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
			t.Errorf("round %d: delete sandbox from snapshot %s: %v", round, s.SnapshotID, err)
		}
	}
	t.Logf("round %d: %d sandboxes (%d running, %d of them networked), %d snapshots: consistent", round, len(all), len(running), len(nets), len(snaps))
}

// listAll lists the team's sandboxes in every state.
func listAll(t *testing.T, ctx context.Context, c *client.Client) []client.ListedSandbox {
	t.Helper()
	var out []client.ListedSandbox
	token := ""
	for {
		page, next, err := c.Sandboxes.List(ctx, client.ListOptions{NextToken: token,
			States: []string{"creating", "running", "paused", "hibernated", "stopped", "failed"}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		token = next
	}
}

// listAllSnapshots lists the team's usable snapshots, every page.
func listAllSnapshots(t *testing.T, ctx context.Context, c *client.Client) []client.Snapshot {
	t.Helper()
	var out []client.Snapshot
	token := ""
	for {
		page, next, err := c.Snapshots.List(ctx, client.SnapshotListOptions{NextToken: token})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		token = next
	}
}

func dirNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// sandboxCgroups lists the sandbox ids that have a cgroup under the
// daemon's parents (native: <parent>/<id>; gvisor: <parent>-gvisor/<id>).
func (d *daemon) sandboxCgroups() []string {
	seen := map[string]bool{}
	for _, parent := range cgroupsNamed(d.cgroupParent, d.cgroupParent+"-gvisor") {
		for _, id := range dirNames(parent) {
			if st, err := os.Stat(filepath.Join(parent, id)); err == nil && st.IsDir() {
				seen[id] = true
			}
		}
	}
	var out []string
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// hostResources are the host resources a data directory's daemon can leak.
// The sandboxes' networks are on the fake host (see tortureHost): Net
// counts its host-side veths (each names its sandbox and holds its
// address), the namespace mounts in the network's run directory, and the
// per-sandbox nftables chains, sets and address-map entries in warren's
// table; Namespaces the sandbox namespaces still alive, whatever holds
// them (see fakenet's PeerNamespaces). The bridge and the table itself
// stay by design once the network has started.
type hostResources struct {
	Mounts, LoopDevices, Cgroups, Subvolumes int
	Net                                      fakenet.Counts
	Namespaces                               int
}

// poolSubvolumes lists the paths of the btrfs subvolumes in a data
// directory's pool, relative to the pool, as btrfs itself knows them.
func poolSubvolumes(t *testing.T, dataDir string) []string {
	t.Helper()
	out, err := exec.Command("btrfs", "subvolume", "list", filepath.Join(dataDir, "pool")).CombinedOutput()
	if err != nil {
		t.Fatalf("btrfs subvolume list: %v: %s", err, out)
	}
	var paths []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if _, path, ok := strings.Cut(l, " path "); ok {
			paths = append(paths, path)
		}
	}
	return paths
}

func (d tortureHost) counts(t *testing.T, st *tortureStats) hostResources {
	t.Helper()
	dataDir := d.dataDir
	var r hostResources
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, dataDir) {
				r.Mounts++
			}
		}
	}
	if entries, err := os.ReadDir("/sys/block"); err == nil {
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "loop", "backing_file")); err == nil && strings.Contains(string(b), dataDir) {
				r.LoopDevices++
			}
		}
	}
	r.Cgroups = len(st.ours(d.sandboxCgroups()))
	r.Subvolumes = len(poolSubvolumes(t, dataDir))
	var err error
	if r.Net, err = d.in.Count(d.runDir); err != nil {
		t.Fatal(err)
	}
	if r.Namespaces, err = d.in.PeerNamespaces(); err != nil {
		t.Fatal(err)
	}
	return r
}

// peerNamespaces counts the sandbox namespaces alive on the fake host,
// waiting a while for the count to come down to want: a namespace dies in
// a kernel worker after its last user let go.
func (d tortureHost) peerNamespaces(t *testing.T, want int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := d.in.PeerNamespaces()
		if err != nil {
			t.Fatal(err)
		}
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// netDump is what the fake host has of warren's network, for a failure's
// message: its links and warren's nftables table, as ip and nft list them,
// and the namespace mounts.
func (d tortureHost) netDump(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	err := fakenet.InNS(d.in.HostNS, func() error {
		// A child forked from this thread starts in its namespace.
		for _, args := range [][]string{{"ip", "-o", "link", "show"}, {"ip", "netns", "list-id"}, {"nft", "list", "table", "inet", "warren"}} {
			out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
			fmt.Fprintf(&b, "\n$ %s (%v)\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(&b, "\nenter the fake host: %v", err)
	}
	fmt.Fprintf(&b, "\nnamespace mounts: %v", dirNames(filepath.Join(d.runDir, "netns")))
	return b.String()
}
