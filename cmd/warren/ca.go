package main

import (
	"github.com/spf13/cobra"
)

// caCmd prints the certificate of the CA warren's TLS listener mints with.
func caCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "ca",
		Short: "Print the certificate (PEM) of warren's own CA, for clients of its TLS listener to trust",
		Long: `ca prints GET /tls/ca.pem: the certificate of the CA that ` + "`warren serve --tls-listen ADDR --tls-ca auto`" + `
made in <data-dir>/tls and mints its TLS certificates with. Clients trust it to
open https:// port URLs (<port>-<id>.<domain>) and the API over TLS. A daemon
serving the operator's certificate (--tls-cert), or no TLS, has no CA: 404.`,
		Example: `  warren ca > warren-ca.pem
  NODE_EXTRA_CA_CERTS=warren-ca.pem node app.mjs
  curl --cacert warren-ca.pem https://8000-$ID.localhost:3443/`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			pem, err := a.client().Meta.TLSCA(cmd.Context())
			if err != nil {
				return err
			}
			_, err = a.out.Write(pem)
			return err
		},
	}
}
