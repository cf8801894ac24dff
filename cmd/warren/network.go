package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

// egressFlags are the egress policy flags of `sandbox create` and `sandbox
// network`.
type egressFlags struct {
	cmd         *cobra.Command
	allow, deny []string
	headers     []string
	internet    bool
	socks       string
	socksUser   string
	getenv      func(string) string
}

// egressProxy is the --socks5 upstream; its password comes from the
// environment (WARREN_SOCKS5_PASSWORD), never from an argument.
func (e *egressFlags) egressProxy() *client.EgressProxy {
	if e.socks == "" {
		return nil
	}
	return &client.EgressProxy{Address: e.socks, Username: e.socksUser, Password: e.getenv("WARREN_SOCKS5_PASSWORD")}
}

// rules turns --header DOMAIN:NAME=VALUE flags into network rules: one
// rule per domain whose transform sets every header given for it.
func (e *egressFlags) rules() (map[string][]client.NetworkRule, error) {
	if len(e.headers) == 0 {
		return nil, nil
	}
	out := map[string][]client.NetworkRule{}
	for _, h := range e.headers {
		domain, kv, ok := strings.Cut(h, ":")
		name, value, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 || domain == "" || name == "" {
			return nil, fmt.Errorf("--header %q: want DOMAIN:NAME=VALUE, e.g. api.example.com:Authorization='Bearer ${e2b.secrets.token}'", h)
		}
		if out[domain] == nil {
			out[domain] = []client.NetworkRule{{Transform: &client.NetworkTransform{Headers: map[string]string{}}}}
		}
		out[domain][0].Transform.Headers[name] = value
	}
	return out, nil
}

func (e *egressFlags) register(cmd *cobra.Command, update bool) {
	e.cmd = cmd
	f := cmd.Flags()
	f.StringVar(&e.socks, "socks5", "", "tunnel the sandbox's allowed TCP through this SOCKS5 server HOST:PORT (E2B's egressProxy; password from env WARREN_SOCKS5_PASSWORD)")
	f.StringVar(&e.socksUser, "socks5-user", "", "username for --socks5 (RFC 1929)")
	if update {
		f.StringArrayVar(&e.allow, "allow-out", nil, "allowed destination: IPv4 address, CIDR, domain or *.domain (repeatable; replaces the list)")
		f.StringArrayVar(&e.deny, "deny-out", nil, "denied destination, wins over --allow-out; 0.0.0.0/0 = only what --allow-out names (repeatable; replaces the list)")
		f.BoolVar(&e.internet, "internet", false, "allow everything not denied (default: keep the sandbox's current setting)")
		f.StringArrayVar(&e.headers, "header", nil, "network rule DOMAIN:NAME=VALUE: the egress proxy sets this header on requests to DOMAIN; VALUE may hold ${e2b.secrets.NAME} (repeatable; replaces the rules)")
		return
	}
	f.StringArrayVar(&e.headers, "header", nil, "network rule DOMAIN:NAME=VALUE: the egress proxy sets this header on the sandbox's requests to DOMAIN; VALUE may hold ${e2b.secrets.NAME} (repeatable; a rule allows nothing by itself)")
	f.StringArrayVar(&e.allow, "allow-out", nil, "give the sandbox a network that reaches this destination: IPv4 address, CIDR, domain or *.domain (repeatable)")
	f.StringArrayVar(&e.deny, "deny-out", nil, "give the sandbox a network that never reaches this destination; wins over --allow-out (repeatable)")
	f.BoolVar(&e.internet, "internet", false, "give the sandbox a network with internet access (everything not denied; private ranges and the host stay denied)")
}

// apply adds the flags to a create; without any the sandbox has no network.
func (e *egressFlags) apply(in *client.NewSandbox) error {
	if e.internet {
		in.AllowInternetAccess = &e.internet
	}
	rules, err := e.rules()
	if err != nil {
		return err
	}
	if len(e.allow) == 0 && len(e.deny) == 0 && rules == nil && e.socks == "" {
		return nil
	}
	if in.Network == nil {
		in.Network = &client.Network{}
	}
	in.Network.AllowOut, in.Network.DenyOut, in.Network.Rules, in.Network.EgressProxy = e.allow, e.deny, rules, e.egressProxy()
	return nil
}

func (e *egressFlags) changed() bool {
	f := e.cmd.Flags()
	return f.Changed("allow-out") || f.Changed("deny-out") || f.Changed("internet") || f.Changed("header") || f.Changed("socks5")
}

func sandboxNetworkCmd(a *app) *cobra.Command {
	egress := egressFlags{getenv: a.getenv}
	cmd := &cobra.Command{
		Use:   "network ID [--allow-out DEST]... [--deny-out DEST]... [--internet[=false]]",
		Short: "Show or replace a networked sandbox's egress policy (live: denied connections are cut)",
		Example: `  warren sandbox network ID
  warren sandbox network ID --allow-out api.example.com --allow-out 198.51.100.0/24
  warren sandbox network ID --internet --deny-out 203.0.113.7
  warren sandbox network events ID`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c := a.client()
			id := argv[0]
			if egress.changed() {
				rules, err := egress.rules()
				if err != nil {
					return err
				}
				p := client.NetworkPolicy{AllowOut: egress.allow, DenyOut: egress.deny, Rules: rules, EgressProxy: egress.egressProxy()}
				if cmd.Flags().Changed("internet") {
					p.AllowInternetAccess = &egress.internet
				}
				if p.AllowOut == nil {
					p.AllowOut = []string{}
				}
				if p.DenyOut == nil {
					p.DenyOut = []string{}
				}
				if err := c.Network.Update(cmd.Context(), id, p); err != nil {
					return err
				}
			}
			p, err := c.Network.Policy(cmd.Context(), id)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, p)
			}
			tw := newTable(a.out)
			row(tw, "Internet access:", fmt.Sprint(p.AllowInternetAccess != nil && *p.AllowInternetAccess))
			row(tw, "Allow out:", orDash(strings.Join(p.AllowOut, ", ")))
			row(tw, "Deny out:", orDash(strings.Join(p.DenyOut, ", ")))
			if p.EgressProxy != nil {
				row(tw, "SOCKS5:", p.EgressProxy.Address+" "+p.EgressProxy.Username)
			}
			for d, rules := range p.Rules {
				for _, r := range rules {
					if r.Transform == nil {
						continue
					}
					for name, v := range r.Transform.Headers {
						row(tw, "Rule:", d+": "+name+": "+v)
					}
				}
			}
			return tw.Flush()
		},
	}
	egress.register(cmd, true)
	cmd.AddCommand(sandboxNetworkEventsCmd(a))
	return cmd
}

func sandboxNetworkEventsCmd(a *app) *cobra.Command {
	var after int64
	return &cobra.Command{
		Use:   "events ID",
		Short: "Show a sandbox's egress audit: every connection attempt and lookup, with the verdict",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			evs, err := allNetworkEvents(cmd.Context(), a.client(), argv[0], after)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, evs)
			}
			tw := newTable(a.out)
			row(tw, "TIME", "VERDICT", "PROTOCOL", "DESTINATION", "DOMAIN", "REASON")
			for _, e := range evs {
				row(tw, fmtTime(e.At), e.Verdict, e.Protocol, orDash(destination(e)), orDash(e.Domain), e.Reason)
			}
			return tw.Flush()
		},
	}
}

// allNetworkEvents pages through a sandbox's egress audit.
func allNetworkEvents(ctx context.Context, c *client.Client, id string, after int64) ([]client.NetworkEvent, error) {
	var out []client.NetworkEvent
	for {
		page, err := c.Network.Events(ctx, id, after, 1000)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

func destination(e client.NetworkEvent) string {
	if e.Port == 0 {
		return e.Destination
	}
	return fmt.Sprintf("%s:%d", e.Destination, e.Port)
}

// networkEventLine is an audit event as the DETAIL of `sandbox events`.
func networkEventLine(e client.NetworkEvent) string {
	if e.Protocol == "dns" {
		return fmt.Sprintf("%s dns lookup of %s (%s)", e.Verdict, e.Domain, e.Reason)
	}
	s := fmt.Sprintf("%s %s %s (%s)", e.Verdict, e.Protocol, destination(e), e.Reason)
	if e.Domain != "" {
		s += " " + e.Domain
	}
	return s
}

// fmtNetwork is a sandbox's egress policy in one line of `sandbox get`.
func fmtNetwork(s client.SandboxDetail) string {
	var parts []string
	switch {
	case s.AllowInternetAccess == nil:
		parts = append(parts, "none (loopback only)")
	case *s.AllowInternetAccess:
		parts = append(parts, "internet")
	default:
		parts = append(parts, "no internet")
	}
	if s.Network != nil && s.Network.MaskRequestHost != "" {
		parts = append(parts, "ports see Host "+s.Network.MaskRequestHost)
	}
	if s.Network != nil {
		if len(s.Network.AllowOut) > 0 {
			parts = append(parts, "allow "+strings.Join(s.Network.AllowOut, ", "))
		}
		if len(s.Network.DenyOut) > 0 {
			parts = append(parts, "deny "+strings.Join(s.Network.DenyOut, ", "))
		}
	}
	return strings.Join(parts, "; ")
}
