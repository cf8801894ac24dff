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
	internet    bool
}

func (e *egressFlags) register(cmd *cobra.Command, update bool) {
	e.cmd = cmd
	f := cmd.Flags()
	if update {
		f.StringArrayVar(&e.allow, "allow-out", nil, "allowed destination: IPv4 address, CIDR, domain or *.domain (repeatable; replaces the list)")
		f.StringArrayVar(&e.deny, "deny-out", nil, "denied destination, wins over --allow-out; 0.0.0.0/0 = only what --allow-out names (repeatable; replaces the list)")
		f.BoolVar(&e.internet, "internet", false, "allow everything not denied (default: keep the sandbox's current setting)")
		return
	}
	f.StringArrayVar(&e.allow, "allow-out", nil, "give the sandbox a network that reaches this destination: IPv4 address, CIDR, domain or *.domain (repeatable)")
	f.StringArrayVar(&e.deny, "deny-out", nil, "give the sandbox a network that never reaches this destination; wins over --allow-out (repeatable)")
	f.BoolVar(&e.internet, "internet", false, "give the sandbox a network with internet access (everything not denied; private ranges and the host stay denied)")
}

// apply adds the flags to a create; without any the sandbox has no network.
func (e *egressFlags) apply(in *client.NewSandbox) {
	if e.internet {
		in.AllowInternetAccess = &e.internet
	}
	if len(e.allow) == 0 && len(e.deny) == 0 {
		return
	}
	if in.Network == nil {
		in.Network = &client.Network{}
	}
	in.Network.AllowOut, in.Network.DenyOut = e.allow, e.deny
}

func (e *egressFlags) changed() bool {
	f := e.cmd.Flags()
	return f.Changed("allow-out") || f.Changed("deny-out") || f.Changed("internet")
}

func sandboxNetworkCmd(a *app) *cobra.Command {
	var egress egressFlags
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
				p := client.NetworkPolicy{AllowOut: egress.allow, DenyOut: egress.deny}
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
