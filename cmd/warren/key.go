package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

func keyCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "key",
		Aliases: []string{"keys", "api-key"},
		Short:   "Manage API keys",
	}
	cmd.AddCommand(keyCreateCmd(a), keyListCmd(a), keyRevokeCmd(a))
	return cmd
}

func keyCreateCmd(a *app) *cobra.Command {
	var in client.NewAPIKey
	cmd := &cobra.Command{
		Use:   "create --team TEAM [--name NAME]",
		Short: "Create an API key and print it (shown only this once)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := a.client().APIKeys.Create(cmd.Context(), in)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, k)
			}
			// The secret alone on stdout, so `KEY=$(warren key create ...)` works.
			fmt.Fprintln(a.out, k.Key)
			fmt.Fprintf(a.errOut, "Created key %s for team %s. Store it now: it is not shown again.\n", k.ID, k.Team)
			return nil
		},
	}
	cmd.Flags().StringVar(&in.Team, "team", "", "team the key belongs to (required)")
	cmd.Flags().StringVar(&in.Name, "name", "", "a label for the key")
	_ = cmd.MarkFlagRequired("team")
	return cmd
}

func keyListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List API keys (without their secrets)",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := a.client().APIKeys.List(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				if keys == nil {
					keys = []client.APIKey{}
				}
				return printJSON(a.out, keys)
			}
			tw := newTable(a.out)
			row(tw, "ID", "TEAM", "NAME", "PREFIX", "CREATED", "LAST USED", "REVOKED")
			for _, k := range keys {
				row(tw, k.ID, k.Team, orDash(k.Name), k.Prefix, fmtTime(k.CreatedAt), fmtTimePtr(k.LastUsedAt), fmt.Sprint(k.Revoked))
			}
			return tw.Flush()
		},
	}
}

func keyRevokeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "revoke ID...",
		Aliases: []string{"rm", "delete"},
		Short:   "Revoke API keys",
		Args:    args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c := a.client()
			return eachID(a, ids, "key", func(id string) error { return c.APIKeys.Revoke(cmd.Context(), id) })
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
