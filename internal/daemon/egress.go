package daemon

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/secrets"
	"github.com/warrenhq/warren/internal/store"
)

// hostBundle is where Debian keeps the host's trusted CAs, the base of the
// sandboxes' trust bundle.
const hostBundle = "/etc/ssl/certs/ca-certificates.crt"

// openEgress opens the secrets (their keyring is <data>/secrets/key) and
// wires the egress proxy into the network.
func (d *Daemon) openEgress(cfg config.Config, log *slog.Logger) error {
	keys, err := secrets.OpenKeyring(filepath.Join(cfg.DataDir, "secrets"))
	if err != nil {
		return err
	}
	// The sandboxes' SOCKS5 passwords are sealed with the same master key.
	d.Store.SetNetworkSealer(keys)
	d.Secrets = secrets.NewService(d.Store, keys)
	return wireEgressProxy(cfg, d.Networks, d.Secrets, d.Store, d.onEvent, log)
}

// wireEgressProxy gives the sandboxes' network its egress proxy: the CA in
// <data>/egress-ca, the trust bundle every networked sandbox gets, and the
// proxy itself, started with the network.
func wireEgressProxy(cfg config.Config, n *sandbox.Networks, sec *secrets.Service, st *store.Store, onEvent func(store.Event), log *slog.Logger) error {
	if n == nil || cfg.Network.EgressProxyPort == 0 {
		return nil
	}
	ca, err := egress.OpenCA(filepath.Join(cfg.DataDir, "egress-ca"))
	if err != nil {
		return err
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if cfg.Network.EgressExtraRoots != "" {
		pem, err := os.ReadFile(cfg.Network.EgressExtraRoots)
		if err != nil {
			return fmt.Errorf("--egress-extra-roots: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--egress-extra-roots %s holds no PEM certificate", cfg.Network.EgressExtraRoots)
		}
	}
	bundle, _ := os.ReadFile(hostBundle) // none on the host: the proxy's CA alone
	if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
		bundle = append(bundle, '\n')
	}
	n.TrustBundle = append(bundle, ca.CertPEM()...)
	n.Options.ProxyPort = cfg.Network.EgressProxyPort
	plog := log.With("component", "egress")
	n.OnStart = func(m *network.Manager) (func(), error) {
		ln, err := m.ListenProxy()
		if err != nil {
			return nil, err
		}
		p := &egress.Proxy{Net: m, Secrets: sandboxSecrets{st: st, sec: sec}, CA: ca, Roots: roots, Log: plog,
			Audit: func(e egress.Event) { recordSecretEvent(st, onEvent, e, plog) }}
		go func() {
			if err := p.Serve(ln); err != nil {
				plog.Error("egress proxy stopped", "err", err)
			}
		}()
		return func() { ln.Close(); p.Close() }, nil
	}
	return nil
}

// sandboxSecrets resolves a secret in the team of the sandbox asking.
type sandboxSecrets struct {
	st  *store.Store
	sec *secrets.Service
}

func (s sandboxSecrets) Resolve(ctx context.Context, sandboxID, name string) (secrets.Resolved, error) {
	rec, err := s.st.GetSandbox(ctx, sandboxID)
	if err != nil {
		return secrets.Resolved{}, err
	}
	return s.sec.Resolve(ctx, rec.Team, name)
}

// recordSecretEvent puts a secret's use or refusal in the sandbox's
// history (warren sandbox events) and log; never the value, which the
// event does not hold.
func recordSecretEvent(st *store.Store, onEvent func(store.Event), e egress.Event, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, err := st.GetSandbox(ctx, e.SandboxID)
	if err != nil {
		log.Warn("egress proxy: event of an unknown sandbox", "sandbox", e.SandboxID, "err", err)
		return
	}
	detail := fmt.Sprintf("secret %s", e.Secret)
	if e.Version > 0 {
		detail += fmt.Sprintf(" version %d", e.Version)
	}
	detail += " to " + e.Host
	if e.Reason != "" {
		detail += ": " + e.Reason
	}
	ev := store.Event{SandboxID: e.SandboxID, Team: rec.Team, At: time.Now(), Kind: e.Kind, From: rec.State, To: rec.State, Cause: "egress", Detail: detail}
	if err := st.AddEvent(ctx, ev); err != nil {
		log.Warn("egress proxy: record event", "sandbox", e.SandboxID, "err", err)
		return
	}
	if onEvent != nil {
		onEvent(ev)
	}
}
