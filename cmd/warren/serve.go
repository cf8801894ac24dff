package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/selfexe"
	"github.com/warrenhq/warren/internal/template"
)

// serveCmd runs the daemon.
func serveCmd() *cobra.Command {
	o := serveFlags{cfg: config.Default()}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the warren daemon (API on --listen; sandboxes survive its restarts)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.serve(cmd)
		},
	}
	o.flags(cmd)
	return cmd
}

// serveFlags are serve's flags: the daemon's config and the sizes given in
// other units than the config's.
type serveFlags struct {
	cfg                                                 config.Config
	imageSizeGiB, diskMB, reserveMB, maxUploadMB, logMB int64
	pprofAddr                                           string
	memoryMB                                            int64
	maxImportMB                                         int64
	cpus                                                float64
	debug                                               bool
	volumeMB                                            int64
}

// serve opens the daemon the flags describe and serves until a signal.
func (o *serveFlags) serve(cmd *cobra.Command) error {
	if o.cfg.Cluster.Cluster == config.ClusterKubernetes {
		// Node mode runs in warren-fleet (fleet_nokube.go says why).
		if err := handOffToFleet(); err != nil {
			return err
		}
	}
	dataDir, _ := cmd.Flags().GetString("data-dir")
	if dataDir != "" {
		o.cfg.DataDir = dataDir
	}
	o.cfg.ImageSize = o.imageSizeGiB << 30
	o.cfg.MaxUploadBytes = o.maxUploadMB << 20
	o.cfg.MaxImportBytes = o.maxImportMB << 20
	o.cfg.SandboxLogBytes = o.logMB << 20
	o.cfg.DefaultLimits.MemoryBytes = o.memoryMB << 20
	o.cfg.DefaultLimits.CPUMillis = int64(o.cpus * 1000)
	o.cfg.DefaultDiskBytes = autoMiB(o.diskMB)
	o.cfg.DiskReserveBytes = autoMiB(o.reserveMB)
	o.cfg.VolumeSizeBytes = o.volumeMB << 20
	if cmd.Flags().Changed("userns") {
		o.cfg.UserNSExplicit = true
	}
	if err := o.cfg.Validate(); err != nil {
		return err
	}
	level := slog.LevelInfo
	if o.debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// Before anything starts: it may re-execute this process.
	if err := selfexe.SealIfCopied(log, o.cfg.RuntimeStateDir()); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if o.pprofAddr != "" {
		if err := servePprof(o.pprofAddr, log); err != nil {
			return err
		}
	}
	d, err := daemon.Open(ctx, o.cfg, log)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.EnsureAdminKey(ctx, cmd.OutOrStdout()); err != nil {
		return err
	}
	if o.cfg.BuildBase {
		if err := d.Templates.Ensure(ctx, daemon.Base, template.BaseSource(), os.Stderr); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Error("could not build the base template; sandboxes need another template until it is built (`warren template build base --debootstrap bookworm`)", "err", err)
		}
	}
	return d.Serve(ctx, nil)
}

// flags binds o to serve's flags.
func (o *serveFlags) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.pprofAddr, "pprof", "", "serve Go's profiler (net/http/pprof) on this loopback address, e.g. 127.0.0.1:6060 (debugging)")
	f.StringVar(&o.cfg.Listen, "listen", o.cfg.Listen, "address of the API (env WARREN_LISTEN)")
	f.StringVar(&o.cfg.Domain, "domain", o.cfg.Domain, "sandbox domain: Host <port>-<id>.<domain> reaches that port in the sandbox; returned to E2B SDKs for getHost (env WARREN_DOMAIN)")
	f.Int64Var(&o.maxUploadMB, "max-upload-mb", o.cfg.MaxUploadBytes>>20, "largest file upload (PUT /sandboxes/{id}/files and the E2B sandbox plane's POST /files), in MiB")
	f.Int64Var(&o.maxImportMB, "max-import-mb", o.cfg.MaxImportBytes>>20, "largest snapshot bundle POST /snapshots/import reads, in MiB")
	f.Int64Var(&o.logMB, "log-mb", o.cfg.SandboxLogBytes>>20, "disk budget of each sandbox's log (process output and lifecycle), in MiB; rotated within it")
	f.StringVar(&o.cfg.Storage, "storage", o.cfg.Storage, "storage backend: btrfs or dir (env WARREN_STORAGE)")
	f.Int64Var(&o.imageSizeGiB, "image-size-gb", o.cfg.ImageSize>>30, "size of the loop-backed btrfs image made when the data dir is not on btrfs (sparse)")
	f.IntVar(&o.cfg.MaxSandboxes, "max-sandboxes", o.cfg.MaxSandboxes, "most sandboxes alive at once (env WARREN_MAX_SANDBOXES)")
	f.IntVar(&o.cfg.MaxConcurrentStarts, "max-concurrent-starts", o.cfg.MaxConcurrentStarts, "most sandbox starts (create, fork, rollback, cold boot, each until its agent answers) running at once; the rest wait in order, warm-pool refills last (-1 = 2 per CPU; 0 = no bound; env WARREN_MAX_CONCURRENT_STARTS)")
	f.Int64Var(&o.memoryMB, "default-memory-mb", o.cfg.DefaultLimits.MemoryBytes>>20, "memory limit of a sandbox that asks for none")
	f.Float64Var(&o.cpus, "default-cpus", float64(o.cfg.DefaultLimits.CPUMillis)/1000, "CPU limit of a sandbox that asks for none")
	f.Int64Var(&o.cfg.DefaultLimits.Pids, "default-pids", o.cfg.DefaultLimits.Pids, "pids limit of a sandbox that asks for none")
	f.Int64Var(&o.diskMB, "default-disk-mb", -1, "disk quota of a sandbox that asks for none, snapshots included (-1 = a tenth of the pool, at most 10 GiB; 0 = none; btrfs only)")
	f.Int64Var(&o.reserveMB, "disk-reserve-mb", -1, "part of the pool no sandbox can write into, kept for the daemon's own work (-1 = a twentieth of the pool within 256 MiB..4 GiB; 0 = none; btrfs only)")
	f.Int64Var(&o.volumeMB, "volume-size-mb", o.cfg.VolumeSizeBytes>>20, "size cap of a shared volume whose create names none (0 = none; btrfs only)")
	f.IntVar(&o.cfg.MaxTurns, "max-turns", o.cfg.MaxTurns, "turn snapshots kept per sandbox; older unnamed turns without forks are pruned (0 = keep all; -1 = 0 with archiving, else 100)")
	f.IntVar(&o.cfg.ArchiveAfter, "archive-after", o.cfg.ArchiveAfter, "newest turn snapshots per sandbox kept in the pool; older ones are archived to send streams and restored on demand (0 = no archiving; btrfs only)")
	f.IntVar(&o.cfg.AnchorEvery, "anchor-every", o.cfg.AnchorEvery, "turns 1, N+1, 2N+1, … stay in the pool as the bases of archived turns' streams")
	f.DurationVar(&o.cfg.DefaultTimeout, "default-timeout", o.cfg.DefaultTimeout, "run timeout of a sandbox whose create names none (0 = never)")
	f.BoolVar(&o.cfg.AllowNoTimeout, "allow-no-timeout", o.cfg.AllowNoTimeout, "accept a run timeout of 0 (the sandbox never expires) at create, fork, /timeout and resume; false answers those 400")
	f.Uint64Var(&o.cfg.OutputLimit, "output-limit", o.cfg.OutputLimit, "cap in bytes on one command's output when the request names none")
	f.BoolVar(&o.cfg.MetricsPublic, "metrics-public", false, "serve GET /metrics (Prometheus) without an API key; it then leaves out the per-sandbox series")
	f.StringVar(&o.cfg.AgentBinary, "agent", o.cfg.AgentBinary, "path of the static warren-agent binary (default: beside warren; env WARREN_AGENT)")
	f.StringVar(&o.cfg.CacheDir, "cache-dir", o.cfg.CacheDir, "where slow build artefacts are cached (env WARREN_CACHE_DIR)")
	f.StringVar(&o.cfg.Runsc, "runsc", o.cfg.Runsc, "gVisor's runsc for the gvisor runtime (default: runsc on PATH, else the newest <cache-dir>/runsc/*/runsc that `make runsc` builds; env WARREN_RUNSC)")
	f.StringVar(&o.cfg.DefaultRuntime, "default-runtime", o.cfg.DefaultRuntime, "runtime of sandboxes whose create names none: native or gvisor (env WARREN_DEFAULT_RUNTIME; default native)")
	f.BoolVar(&o.cfg.BuildBase, "build-base", o.cfg.BuildBase, "build the `base` template by debootstrap at start when it is missing")
	f.DurationVar(&o.cfg.IdleTimeout, "idle-timeout", 0, "pause (or kill, --idle-action) a sandbox with no API call, command or process output for this long (0 = never)")
	f.StringVar(&o.cfg.IdleAction, "idle-action", "pause", "what the idle timeout does: pause, hibernate (gvisor sandboxes: memory saved to disk and freed; others are paused) or kill")
	f.DurationVar(&o.cfg.PausedRetention, "paused-retention", 0, "kill a sandbox paused for this long (0 = never)")
	f.StringArrayVar(&o.cfg.Pools, "pool", nil, "warm pool TEMPLATE[@RUNTIME]=MIN[:MAX[:TTL]]: keep MIN ready sandboxes of TEMPLATE (on RUNTIME, e.g. base@gvisor=2; default: the template's, else --default-runtime) for fast creates, each replaced after TTL unclaimed (repeatable; one pool per template and runtime)")
	f.BoolVar(&o.cfg.CgroupFavorDynmods, "cgroup-favordynmods", o.cfg.CgroupFavorDynmods, "turn on the kernel's favordynmods cgroup option (host-wide; on kernel 6.18 it stays on until reboot): a sandbox start then skips an RCU grace period, about 10 ms")
	f.StringVar(&o.cfg.CgroupParent, "cgroup-parent", o.cfg.CgroupParent, "relative cgroup path sandboxes' cgroups are made under (<parent>/<id>, gvisor's <parent>-gvisor/<id>), nested in the daemon's own cgroup; each daemon on a host needs its own (env WARREN_CGROUP_PARENT)")
	f.BoolVar(&o.debug, "debug", false, "log every request")
	f.BoolVar(&o.cfg.NoNewPrivileges, "no-new-privileges", o.cfg.NoNewPrivileges, "start every sandbox with no_new_privs: sudo and other setuid binaries fail inside (default off, as in E2B; a template can ask for it alone; env WARREN_NO_NEW_PRIVILEGES)")
	f.BoolVar(&o.cfg.UserNS, "userns", o.cfg.UserNS, "start every native sandbox in a user namespace: root inside is an unprivileged host uid, files keep their owners through idmapped mounts (default on: a host that cannot falls back to none with a warning, unless --userns is given explicitly; --userns=false opts out; docs/security.md; env WARREN_USERNS)")
	f.Uint32Var(&o.cfg.UserNSBase, "userns-base", o.cfg.UserNSBase, "first host uid/gid of the sandboxes' user namespace ranges (65536 ids each)")
	f.IntVar(&o.cfg.UserNSSlots, "userns-slots", o.cfg.UserNSSlots, "how many 65536-id ranges from --userns-base sandboxes may hold at once")
	f.StringSliceVar(&o.cfg.CDISpecDirs, "cdi-spec-dirs", o.cfg.CDISpecDirs, "directories of CDI specs naming the host devices sandboxes may ask for (docs/devices.md)")
	f.StringSliceVar(&o.cfg.CDITrustedHookDirs, "cdi-trusted-hook-dirs", nil, "CDI spec directories whose specs may run hooks (host programs, as root) at a sandbox's start; devices with hooks from elsewhere are refused")
	f.BoolVar(&o.cfg.AgentLogs, "agent-logs", false, "keep each sandbox agent's output in <data-dir>/logs (debugging only: a sandbox's root can write to those host files)")
	networkFlags(cmd, &o.cfg.Network)
	clusterFlags(cmd, &o.cfg.Cluster)
	tlsFlags(cmd, &o.cfg.TLS)
}

// tlsFlags are serve's flags for its TLS listener (README, "TLS").
func tlsFlags(cmd *cobra.Command, t *config.TLSConfig) {
	f := cmd.Flags()
	f.StringVar(&t.Listen, "tls-listen", t.Listen, "also serve the API, the sandbox plane and port URLs over TLS on this address, e.g. 127.0.0.1:3443 (env WARREN_TLS_LISTEN)")
	f.StringVar(&t.Cert, "tls-cert", t.Cert, "PEM certificate (chain) for --tls-listen: a wildcard for *.<domain> and the API's name (env WARREN_TLS_CERT)")
	f.StringVar(&t.Key, "tls-key", t.Key, "PEM private key of --tls-cert (env WARREN_TLS_KEY)")
	f.StringVar(&t.CA, "tls-ca", t.CA, "auto: warren's own CA, made once in <data-dir>/tls, mints a certificate per name on first use (trust it: `warren ca`); instead of --tls-cert (env WARREN_TLS_CA)")
}

// clusterFlags are serve's flags for node mode (docs/kubernetes.md, "Node mode").
func clusterFlags(cmd *cobra.Command, k *config.ClusterConfig) {
	f := cmd.Flags()
	f.StringVar(&k.Cluster, "cluster", k.Cluster, "run as a node of a fleet: kubernetes (publish a Lease, a WarrenNode and Sandbox objects, run Sandbox objects assigned to this node, sync API key Secrets); empty: a single host (env WARREN_CLUSTER)")
	f.StringVar(&k.Kubeconfig, "kubeconfig", k.Kubeconfig, "kubeconfig file for --cluster kubernetes; empty: the pod's service account (env KUBECONFIG)")
	f.StringVar(&k.NodeName, "node-name", k.NodeName, "this node's name in the fleet: its WarrenNode, Lease warren-node-<name> and warren.dev/node label (env WARREN_NODE_NAME; default the host name)")
	f.StringVar(&k.AdvertiseURL, "advertise-url", k.AdvertiseURL, "URL the gateway reaches this node's API at (env WARREN_ADVERTISE_URL; default http://<--listen>)")
	f.StringVar(&k.Namespace, "kube-namespace", k.Namespace, "namespace of the node's Lease, Sandbox objects and the fleet's key Secrets (env WARREN_KUBE_NAMESPACE)")
	f.DurationVar(&k.LeaseDuration, "lease-duration", k.LeaseDuration, "how long the node's Lease holds without renewal (renewed every third); a node silent that long is taken for lost (env WARREN_LEASE_DURATION)")
}

// networkFlags are serve's flags for sandbox networking (see `warren sandbox
// create --internet` and `--allow-out`).
func networkFlags(cmd *cobra.Command, n *config.NetworkConfig) {
	f := cmd.Flags()
	uplink := n.Uplink
	if uplink == "" {
		uplink = "auto"
	}
	f.BoolVar(&n.Enabled, "network", n.Enabled, "let sandboxes ask for a network (egress policy); false refuses such creates (env WARREN_NETWORK)")
	f.StringVar(&n.Subnet, "network-subnet", n.Subnet, "IPv4 range of sandbox addresses; its first address is the bridge's (env WARREN_NETWORK_SUBNET)")
	f.StringVar(&n.Bridge, "network-bridge", n.Bridge, "name of warren's bridge; each daemon on a host needs its own (env WARREN_NETWORK_BRIDGE)")
	f.StringVar(&n.Table, "network-table", n.Table, "name of warren's nftables table (inet family); each daemon on a host needs its own (env WARREN_NETWORK_TABLE)")
	f.StringVar(&n.VethPrefix, "network-veth-prefix", n.VethPrefix, "1 to 3 letters or digits that start the names of the sandboxes' host-side veths; each daemon on a host needs its own (env WARREN_NETWORK_VETH_PREFIX)")
	f.Uint16Var(&n.LogGroup, "network-log-group", n.LogGroup, "NFLOG group of the egress audit; each daemon on a host needs its own (env WARREN_NETWORK_LOG_GROUP)")
	f.StringVar(&n.Uplink, "network-uplink", uplink, "interface toward the internet; auto = the default route's (env WARREN_NETWORK_UPLINK)")
	f.StringVar(&n.DNS, "network-dns", n.DNS, "upstream DNS resolver IP[:PORT] for allowed names (default: the first nameserver of /etc/resolv.conf; env WARREN_NETWORK_DNS)")
	f.StringArrayVar(&n.Permit, "network-permit", n.Permit, "CIDR that sandbox policies may allow although it is always denied otherwise (private ranges, link-local), e.g. an internal mirror (repeatable; env WARREN_NETWORK_PERMIT, comma-separated)")
	f.StringVar(&n.NetNS, "network-netns", n.NetNS, "run the bridge, rules and resolver inside this network namespace (a path) instead of the host's (env WARREN_NETWORK_NETNS)")
	f.StringVar(&n.RunDir, "network-run-dir", n.RunDir, "where sandbox network namespaces are mounted (default: /run/warren/network on a tmpfs /run, else <data-dir>/network-run); each daemon on a host needs its own (env WARREN_NETWORK_RUN_DIR)")
	f.Uint16Var(&n.EgressProxyPort, "egress-proxy-port", n.EgressProxyPort, "port of the egress proxy on the bridge's address, which applies network rules and secrets to sandboxes' HTTP(S); 0 turns it off (env WARREN_EGRESS_PROXY_PORT)")
	f.StringVar(&n.EgressExtraRoots, "egress-extra-roots", n.EgressExtraRoots, "PEM file of CAs the egress proxy trusts upstream besides the host's store (env WARREN_EGRESS_EXTRA_ROOTS)")
	f.BoolVar(&n.BuildInternet, "template-build-internet", n.BuildInternet, "template builds whose request says nothing about the network get the internet, as E2B's builds do (default: loopback only; env WARREN_TEMPLATE_BUILD_INTERNET)")
	f.StringArrayVar(&n.Pools, "network-pool", nil, "warm pool TEMPLATE=MIN[:MAX[:TTL]] of sandboxes with a network namespace ready (nothing open) for creates that ask for a network (repeatable)")
}

// templateBuildCmd builds a template into the local data directory. It runs
// on the host (as root) rather than through the API because its sources
// are host paths, which no API key should be able to name.
func templateBuildCmd(a *app) *cobra.Command {
	var (
		file        fileBuild
		src         template.Source
		replace     bool
		storageB    string
		runtimeName string
		noNewPrivs  bool
		devs        []string
	)
	cmd := &cobra.Command{
		Use:   "build NAME (--from-rootfs DIR|TAR | --debootstrap SUITE | --from-image REF | --busybox | --file TEMPLATE.json)",
		Short: "Build a template on this host (root; writes the local data directory)",
		Example: `  warren template build base --debootstrap bookworm
  warren template build py --from-image ./python-oci-layout
  warren template build mini --busybox
  warren template build untrusted --busybox --runtime gvisor
  warren template build locked --debootstrap bookworm --no-new-privileges
  warren template build my-env --file template.json --tag v1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file.file != "" {
				file.runtime = runtimeName
				return file.run(cmd, a, args[0])
			}
			cfg := config.Default()
			if v, _ := cmd.Flags().GetString("data-dir"); v != "" {
				cfg.DataDir = v
			}
			if storageB != "" {
				cfg.Storage = storageB
			}
			if src.Debootstrap != "" && len(src.Packages) == 0 {
				src.Packages = template.BaseSource().Packages
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			d, err := daemon.OpenStorage(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer d.Close()
			t, err := d.Templates.Build(ctx, args[0], src, daemon.BuildOptions{Replace: replace, Runtime: runtimeName, NoNewPrivileges: noNewPrivs, Devices: devs, Progress: os.Stderr})
			if err != nil {
				return err
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				return printJSONValue(cmd, t)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "built template %s (%s)\n", t.Name, t.Source)
			return nil
		},
	}
	file.flags(cmd)
	f := cmd.Flags()
	f.StringVar(&src.RootFS, "from-rootfs", "", "a root filesystem directory or tarball (.tar, .tar.gz)")
	f.StringVar(&src.Debootstrap, "debootstrap", "", "a Debian/Ubuntu suite to debootstrap, e.g. bookworm")
	f.StringSliceVar(&src.Packages, "package", nil, "extra packages for --debootstrap (default: the base set)")
	f.StringVar(&src.Image, "from-image", "", "an OCI image: registry reference, docker-archive tarball or OCI layout directory")
	f.BoolVar(&src.Busybox, "busybox", false, "a minimal tree from the host's busybox-static")
	f.BoolVar(&replace, "replace", false, "replace an existing template of that name")
	f.StringVar(&storageB, "storage", "", "storage backend (must match the daemon's)")
	f.StringVar(&runtimeName, "runtime", "", "runtime every sandbox of this template must run on (native or gvisor; default: any, the create's or the server's); with --file: the build's runtime (gvisor snapshots the start command with memory)")
	f.BoolVar(&noNewPrivs, "no-new-privileges", false, "start every sandbox of this template with no_new_privs: sudo and other setuid binaries fail in it (docs/security.md)")
	f.StringArrayVar(&devs, "device", nil, "a host device (CDI name) every sandbox of this template gets unless its create asks for others (repeatable; docs/devices.md)")
	return cmd
}

func printJSONValue(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// servePprof serves net/http/pprof on a loopback address: profiles show
// sandbox ids and paths, so they never go on the API's listener.
func servePprof(addr string, log *slog.Logger) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--pprof %q: give a loopback address (127.0.0.1:PORT)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	go func() {
		if err := http.Serve(ln, mux); err != nil {
			log.Warn("pprof server ended", "err", err)
		}
	}()
	return nil
}

// autoMiB turns a size flag in MiB into bytes, keeping -1 (auto) as it is.
func autoMiB(mib int64) int64 {
	if mib == -1 {
		return -1
	}
	return mib << 20
}
