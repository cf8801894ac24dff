package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

// secretCmd manages the team's secrets. Values are read from stdin, never
// from arguments (which other users see in ps and shells keep in history).
func secretCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "secret",
		Aliases: []string{"secrets"},
		Short:   "Manage secrets that sandboxes use through the egress proxy without reading them",
		Long: `A secret's value stays on the host. A sandbox holds its placeholder, ${e2b.secrets.NAME},
in a network rule's header (warren sandbox network ... or the create's network.rules) or in a
request header; the egress proxy puts the value in for HTTPS requests to the secret's allowed hosts.`,
	}
	cmd.AddCommand(secretListCmd(a), secretCreateCmd(a), secretUpdateCmd(a), secretRemoveCmd(a))
	return cmd
}

// readValue reads a secret's value from stdin, without one trailing newline
// (what `echo value |` adds).
func readValue(a *app) (string, error) {
	b, err := io.ReadAll(io.LimitReader(a.in, 1<<20+1))
	if err != nil {
		return "", fmt.Errorf("read the value from stdin: %w", err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("no value on stdin (pipe it in: printf %%s \"$TOKEN\" | warren secret create NAME)")
	}
	return v, nil
}

func printSecret(a *app, s client.Secret, verb string) error {
	if a.json {
		return printJSON(a.out, s)
	}
	fmt.Fprintf(a.out, "%s secret %s (%s) version %d; use it as %s\n", verb, s.Name, s.SecretID, s.CurrentVersion, client.Placeholder(s.Name))
	return nil
}

func secretCreateCmd(a *app) *cobra.Command {
	var meta, hosts []string
	cmd := &cobra.Command{
		Use:     "create NAME < value",
		Short:   "Create a secret; its value is read from stdin",
		Example: `  printf %s "$OPENAI_API_KEY" | warren secret create openai --allow-host api.openai.com`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			m, err := parseKV("meta", meta)
			if err != nil {
				return err
			}
			v, err := readValue(a)
			if err != nil {
				return err
			}
			s, err := a.client().Secrets.Create(cmd.Context(), client.NewSecret{Name: argv[0], Value: v, Metadata: m, AllowedHosts: hosts})
			if err != nil {
				return err
			}
			return printSecret(a, s, "Created")
		},
	}
	cmd.Flags().StringArrayVar(&meta, "meta", nil, "metadata KEY=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&hosts, "allow-host", nil, "domain (or *.domain) the value may be sent to (repeatable; none: any host the sandbox's rules name)")
	return cmd
}

func secretUpdateCmd(a *app) *cobra.Command {
	var meta, hosts []string
	cmd := &cobra.Command{
		Use:   "update NAME|ID < value",
		Short: "Store a new version of a secret; its value is read from stdin",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			m, err := parseKV("meta", meta)
			if err != nil {
				return err
			}
			v, err := readValue(a)
			if err != nil {
				return err
			}
			s, err := a.client().Secrets.Update(cmd.Context(), argv[0], client.SecretUpdate{Value: v, Metadata: m, AllowedHosts: hosts})
			if err != nil {
				return err
			}
			return printSecret(a, s, "Updated")
		},
	}
	cmd.Flags().StringArrayVar(&meta, "meta", nil, "replace the metadata with these KEY=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&hosts, "allow-host", nil, "replace the allowed hosts (repeatable)")
	return cmd
}

func secretListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List secrets (never their values)",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			all := []client.Secret{}
			for token := ""; ; {
				page, next, err := a.client().Secrets.List(cmd.Context(), 0, token)
				if err != nil {
					return err
				}
				all = append(all, page...)
				if next == "" {
					break
				}
				token = next
			}
			if a.json {
				return printJSON(a.out, all)
			}
			tw := newTable(a.out)
			row(tw, "ID", "NAME", "VERSION", "ALLOWED HOSTS", "UPDATED")
			for _, s := range all {
				row(tw, s.SecretID, s.Name, fmt.Sprint(s.CurrentVersion), orDash(strings.Join(s.AllowedHosts, ",")), fmtTime(s.UpdatedAt))
			}
			return tw.Flush()
		},
	}
}

func secretRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME|ID",
		Aliases: []string{"delete"},
		Short:   "Delete a secret and every version of it",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := a.client().Secrets.Delete(cmd.Context(), argv[0]); err != nil {
				return err
			}
			if !a.json {
				fmt.Fprintf(a.out, "Deleted secret %s\n", argv[0])
			}
			return nil
		},
	}
}
