package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/runtime"
)

// Networks starts the sandboxes' network (internal/network's Manager) when
// it is first needed: a daemon whose sandboxes never ask for a network
// never touches the host's interfaces, forwarding or nftables.
type Networks struct {
	Options network.Options
	// Owner names the daemon (its data directory) in the run directory's
	// record, so that tearing down another data directory leaves it alone.
	Owner string
	// TrustBundle is the PEM put in every networked sandbox's trust store
	// (the host's CAs and the egress proxy's), or nil.
	TrustBundle []byte
	// OnStart runs once the manager is up (the egress proxy starts
	// there); the function it returns runs before the manager closes.
	OnStart func(*network.Manager) (stop func(), err error)

	mu        sync.Mutex
	m         *network.Manager
	stop      func()
	lastErr   error // why networking was found unavailable, until checkedAt+recheckAfter
	checkedAt time.Time
}

// recheckAfter is how long a failed probe or start is believed: networking
// that was missing (a module not loaded, no default route yet) is looked
// for again after that, without a restart.
const recheckAfter = 10 * time.Second

// Running returns the manager if it has been started, else nil.
func (n *Networks) Running() *network.Manager {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m
}

// Start returns the manager, starting it if it is not running.
func (n *Networks) Start() (*network.Manager, error) {
	if n == nil {
		return nil, fmt.Errorf("this server runs without sandbox networking (--network=false): %w", errdefs.ErrUnsupported)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m != nil {
		return n.m, nil
	}
	if err := n.recentErr(); err != nil {
		return nil, err
	}
	if err := checkRunDirOwner(n.Options.RunDir, n.Owner); err != nil {
		return nil, err
	}
	m, err := network.New(n.Options)
	if err != nil {
		n.lastErr, n.checkedAt = err, time.Now()
		return nil, fmt.Errorf("sandbox networking is unavailable on this server: %w: %w", err, errdefs.ErrUnsupported)
	}
	if err := writeNetworkOptions(n.Options, n.Owner); err != nil {
		m.Close()
		return nil, err
	}
	if n.OnStart != nil {
		stop, err := n.OnStart(m)
		if err != nil {
			m.Close()
			n.lastErr, n.checkedAt = err, time.Now()
			return nil, fmt.Errorf("sandbox networking is unavailable on this server: %w: %w", err, errdefs.ErrUnsupported)
		}
		n.stop = stop
	}
	n.m, n.lastErr = m, nil
	return m, nil
}

// networkOptionsFile, in the run directory, records where the network was
// made, so that `warren teardown` can remove it without the daemon's flags.
const networkOptionsFile = "options.json"

type recordedOptions struct {
	Owner  string `json:"owner"`
	NetNS  string `json:"netns,omitempty"`
	Bridge string `json:"bridge"`
	// Table, VethPrefix and LogGroup are absent from the records of
	// daemons older than these options: they used the defaults.
	Table      string   `json:"table,omitempty"`
	VethPrefix string   `json:"vethPrefix,omitempty"`
	LogGroup   uint16   `json:"logGroup,omitempty"`
	Subnet     string   `json:"subnet"`
	Uplink     string   `json:"uplink,omitempty"`
	Upstream   string   `json:"upstream,omitempty"`
	Permit     []string `json:"permit,omitempty"`
	Deny       []string `json:"deny,omitempty"`
}

func writeNetworkOptions(o network.Options, owner string) error {
	rec := recordedOptions{Owner: owner, NetNS: o.NetNS, Bridge: o.Bridge, Table: o.Table, VethPrefix: o.VethPrefix, LogGroup: o.LogGroup,
		Subnet: o.Subnet.String(), Uplink: o.Uplink, Upstream: o.Upstream}
	for _, p := range o.Permit {
		rec.Permit = append(rec.Permit, p.String())
	}
	for _, p := range o.Deny {
		rec.Deny = append(rec.Deny, p.String())
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.RunDir, networkOptionsFile), b, 0o600); err != nil {
		return fmt.Errorf("record the network's options: %w", err)
	}
	return nil
}

// checkRunDirOwner refuses a run directory another daemon's record names
// while that daemon's data directory exists: the run directory holds the
// sandboxes' namespace mounts, and this daemon's reconcile would remove
// the other's as sandboxes it has no record of. A record whose data
// directory is gone is left from a daemon that no longer exists.
func checkRunDirOwner(runDir, owner string) error {
	b, err := os.ReadFile(filepath.Join(runDir, networkOptionsFile))
	if err != nil {
		return nil // none yet (or unreadable: writeNetworkOptions says so)
	}
	var rec recordedOptions
	if json.Unmarshal(b, &rec) != nil || rec.Owner == "" || rec.Owner == owner {
		return nil
	}
	if _, err := os.Stat(rec.Owner); err != nil {
		return nil
	}
	return fmt.Errorf("the network run directory %s is the daemon of %s's; give each daemon on a host its own --network-run-dir (and bridge, subnet, table, veth prefix and log group; see docs/operations.md): %w",
		runDir, rec.Owner, errdefs.ErrConflict)
}

// RecordedNetwork returns the options the daemon of owner started the
// network in runDir with; ok is false when it never did (or another did).
func RecordedNetwork(runDir, owner string) (_ network.Options, ok bool, _ error) {
	b, err := os.ReadFile(filepath.Join(runDir, networkOptionsFile))
	if errors.Is(err, os.ErrNotExist) {
		return network.Options{}, false, nil
	}
	if err != nil {
		return network.Options{}, false, err
	}
	var rec recordedOptions
	if err := json.Unmarshal(b, &rec); err != nil {
		return network.Options{}, false, fmt.Errorf("%s: %w", networkOptionsFile, err)
	}
	if rec.Owner != owner {
		return network.Options{}, false, nil
	}
	o := network.Options{RunDir: runDir, NetNS: rec.NetNS, Bridge: rec.Bridge, Table: rec.Table, VethPrefix: rec.VethPrefix,
		LogGroup: rec.LogGroup, Uplink: rec.Uplink, Upstream: rec.Upstream}
	if o.Subnet, err = netip.ParsePrefix(rec.Subnet); err != nil {
		return network.Options{}, false, fmt.Errorf("%s: %w", networkOptionsFile, err)
	}
	for _, l := range []struct {
		in  []string
		out *[]netip.Prefix
	}{{rec.Permit, &o.Permit}, {rec.Deny, &o.Deny}} {
		for _, s := range l.in {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return network.Options{}, false, fmt.Errorf("%s: %w", networkOptionsFile, err)
			}
			*l.out = append(*l.out, p)
		}
	}
	return o, true, nil
}

// recentErr is the last failure while it is believed (mu held).
func (n *Networks) recentErr() error {
	if n.lastErr == nil || time.Since(n.checkedAt) > recheckAfter {
		return nil
	}
	return fmt.Errorf("sandbox networking is unavailable on this server: %w: %w", n.lastErr, errdefs.ErrUnsupported)
}

// Available reports whether networked sandboxes can be made: nil when the
// manager runs, or has not started yet and a probe of the host (which
// changes nothing) finds what it needs.
func (n *Networks) Available() error {
	if n == nil {
		return fmt.Errorf("this server runs without sandbox networking (--network=false): %w", errdefs.ErrUnsupported)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m != nil {
		return nil
	}
	if n.lastErr != nil && time.Since(n.checkedAt) <= recheckAfter {
		return n.recentErr()
	}
	if !n.checkedAt.IsZero() && n.lastErr == nil && time.Since(n.checkedAt) <= recheckAfter {
		return nil
	}
	n.lastErr, n.checkedAt = network.Probe(n.Options), time.Now()
	return n.recentErr()
}

// LeftBehind reports whether an earlier run left sandbox networks in the
// run directory: then the manager must start to adopt or remove them.
func (n *Networks) LeftBehind() bool {
	if n == nil {
		return false
	}
	entries, err := os.ReadDir(filepath.Join(n.Options.RunDir, "netns"))
	return err == nil && len(entries) > 0
}

// Close stops the manager; the kernel state stays and keeps confining the
// sandboxes, which outlive the daemon.
func (n *Networks) Close() error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		return nil
	}
	if n.stop != nil {
		n.stop()
		n.stop = nil
	}
	err := n.m.Close()
	n.m = nil
	return err
}

// netManager is what a sandbox's network needs of internal/network's
// Manager.
type netManager interface {
	Setup(ctx context.Context, id string, p network.Policy) (*network.Attachment, error)
	Attachment(id string) (*network.Attachment, error)
	Readdress(id string) error
	Update(ctx context.Context, id string, p network.Policy) error
	Teardown(ctx context.Context, id string) error
	Reconcile(ctx context.Context, keep map[string]bool) error
}

// sandboxNetworks gives sandboxes their network namespaces and egress
// policies, through the manager Networks starts on first need.
type sandboxNetworks struct {
	networks *Networks // nil: this host runs without networking
	// sockets holds each sandbox's run directory, where its resolv.conf is
	// written.
	sockets agentSockets
}

// running is the manager if it has been started, else nil.
func (nw *sandboxNetworks) running() netManager {
	if m := nw.networks.Running(); m != nil {
		return m
	}
	return nil
}

// start returns the manager, starting it if it is not running.
func (nw *sandboxNetworks) start() (netManager, error) {
	m, err := nw.networks.Start()
	if err != nil {
		return nil, err
	}
	return m, nil
}

// NetworkAvailable reports whether a sandbox can be given a network.
func (nw *sandboxNetworks) NetworkAvailable() error {
	return nw.networks.Available()
}

// setupNetwork gives a new sandbox its network namespace.
func (nw *sandboxNetworks) setupNetwork(ctx context.Context, id string, p network.Policy) error {
	m, err := nw.start()
	if err != nil {
		return err
	}
	if _, err := m.Setup(ctx, id, p); err != nil {
		return fmt.Errorf("set up the network of sandbox %s: %w", id, err)
	}
	return nil
}

// attachNetwork joins the runtime spec to the sandbox's network namespace
// and names its resolver in /etc/resolv.conf (a read-only bind mount of a
// file in the sandbox's run directory).
func (nw *sandboxNetworks) attachNetwork(id string, rs *runtime.Spec) error {
	m := nw.running()
	if m == nil {
		return fmt.Errorf("sandbox %s has a network policy but networking is not running: %w", id, errdefs.ErrUnavailable)
	}
	att, err := m.Attachment(id)
	if err != nil {
		return err
	}
	// A gvisor sandbox's earlier runsc took the address off the interface.
	if err := m.Readdress(id); err != nil {
		return err
	}
	resolv := filepath.Join(nw.sockets.dir(id), "resolv.conf")
	content := fmt.Sprintf("# written by warren: the sandbox's resolver answers only names its policy allows\nnameserver %s\noptions edns0\n", att.Gateway)
	if err := os.WriteFile(resolv, []byte(content), 0o644); err != nil {
		return fmt.Errorf("write resolv.conf of sandbox %s: %w", id, err)
	}
	rs.NetNS = att.NetNSPath
	rs.Mounts = append(rs.Mounts, runtime.Mount{Source: resolv, Destination: "/etc/resolv.conf", ReadOnly: true})
	return nw.attachTrust(id, rs)
}

// trustBundleName is the trust bundle's name in the agent's run directory.
const trustBundleName = "ca-certificates.crt"

// attachTrust puts the trust bundle (the host's CAs and the egress proxy's
// CA) where the sandbox's TLS clients look: over the system bundle when
// the template has one, and named by the variables OpenSSL, Node and
// Python's requests read. It is written to the agent's run directory,
// mounted read-only, so the sandbox cannot change what it trusts for
// others.
func (nw *sandboxNetworks) attachTrust(id string, rs *runtime.Spec) error {
	if len(nw.networks.TrustBundle) == 0 {
		return nil
	}
	bundle := filepath.Join(nw.sockets.dir(id), trustBundleName)
	if err := os.WriteFile(bundle, nw.networks.TrustBundle, 0o644); err != nil {
		return fmt.Errorf("write the trust bundle of sandbox %s: %w", id, err)
	}
	const system = "/etc/ssl/certs/ca-certificates.crt"
	// Only a regular file is mounted over (libcontainer resolves the
	// destination inside the root, so a symlink could not lead out, but
	// it would not be the bundle either).
	if st, err := os.Lstat(filepath.Join(rs.RootFS, system)); err == nil && st.Mode().IsRegular() {
		rs.Mounts = append(rs.Mounts, runtime.Mount{Source: bundle, Destination: system, ReadOnly: true})
	}
	for k, v := range trustEnv() {
		rs.Env = append(rs.Env, k+"="+v)
	}
	return nil
}

// trustEnv names the trust bundle for the TLS clients that read a
// variable (OpenSSL and curl, Node, Python's requests).
func trustEnv() map[string]string {
	inside := AgentRunDir + "/" + trustBundleName
	return map[string]string{"SSL_CERT_FILE": inside, "NODE_EXTRA_CA_CERTS": inside, "REQUESTS_CA_BUNDLE": inside, "CURL_CA_BUNDLE": inside}
}

// withTrustEnv adds trustEnv to env (its own values win) when sandbox id
// was given the trust bundle: a warm-pool sandbox's claim replaces the
// environment its agent started with.
func withTrustEnv(sockets agentSockets, id string, env map[string]string) map[string]string {
	if _, err := os.Stat(filepath.Join(sockets.dir(id), trustBundleName)); err != nil {
		return env
	}
	out := trustEnv()
	maps.Copy(out, env)
	return out
}

// UpdateNetwork replaces a networked sandbox's egress policy in place:
// existing connections the new policy denies are cut.
func (nw *sandboxNetworks) UpdateNetwork(ctx context.Context, id string, p network.Policy) error {
	m := nw.running()
	if m == nil {
		return fmt.Errorf("networking is not running on this server: %w", errdefs.ErrUnavailable)
	}
	return m.Update(ctx, id, p)
}

// AdoptNetwork takes over the network of a sandbox an earlier daemon set
// up (same namespace and address) and re-applies its policy.
func (nw *sandboxNetworks) AdoptNetwork(ctx context.Context, id string, p network.Policy) error {
	m, err := nw.start()
	if err != nil {
		return err
	}
	if _, err := m.Setup(ctx, id, p); err != nil && !errdefs.IsAlreadyExists(err) {
		return fmt.Errorf("adopt the network of sandbox %s: %w", id, err)
	}
	return nil
}

// teardownNetwork removes a sandbox's network, if networking runs (a
// sandbox without one costs a lookup or two).
func (nw *sandboxNetworks) teardownNetwork(ctx context.Context, id string) error {
	m := nw.running()
	if m == nil {
		return nil
	}
	return m.Teardown(ctx, id)
}

// reconcileNetwork removes the network of every sandbox not in keep.
func (nw *sandboxNetworks) reconcileNetwork(ctx context.Context, keep map[string]bool) error {
	m := nw.running()
	if m == nil {
		return nil
	}
	if err := m.Reconcile(ctx, keep); err != nil {
		return fmt.Errorf("reconcile sandbox networks: %w", err)
	}
	return nil
}
