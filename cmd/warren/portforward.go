package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"

	"github.com/spf13/cobra"
)

func portForwardCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "port-forward ID PORT [LOCALPORT]",
		Short: "Forward a local TCP port to a port inside a sandbox",
		Long: `Listen on 127.0.0.1:LOCALPORT and carry each connection to PORT inside the
sandbox, through the daemon and the sandbox's agent (this works with the
sandbox's network off). LOCALPORT 0 or omitted picks a free port; the address
is printed. Runs until interrupted.`,
		Args: args(cobra.RangeArgs(2, 3)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			port, err := portArg("PORT", argv[1], 1)
			if err != nil {
				return err
			}
			local := 0
			if len(argv) == 3 {
				if local, err = portArg("LOCALPORT", argv[2], 0); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			c := a.client()
			// Fail now, not at the first connection, on a wrong id or key.
			if _, err := c.Sandboxes.Get(ctx, argv[0]); err != nil {
				return err
			}
			var lc net.ListenConfig
			ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
			if err != nil {
				return fmt.Errorf("listen on 127.0.0.1:%d: %w", local, err)
			}
			stop := context.AfterFunc(ctx, func() { ln.Close() })
			defer stop()
			defer ln.Close()
			fmt.Fprintf(a.out, "Forwarding %s -> sandbox %s port %d\n", ln.Addr(), argv[0], port)
			var wg sync.WaitGroup
			defer wg.Wait()
			for {
				lconn, err := ln.Accept()
				if err != nil {
					if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
						return nil
					}
					return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer lconn.Close()
					rconn, err := c.Network.ConnectPort(ctx, argv[0], port)
					if err != nil {
						fmt.Fprintf(a.errOut, "port-forward: %s\n", a.describe(err))
						return
					}
					defer rconn.Close()
					stopConn := context.AfterFunc(ctx, func() { lconn.Close(); rconn.Close() })
					defer stopConn()
					pipe(lconn, rconn)
				}()
			}
		},
	}
}

// pipe copies both ways, passing half-closes on, until both directions end.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	one := func(dst, src net.Conn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil {
			a.Close() // a broken direction ends the other too
			b.Close()
			return
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
	wg.Add(2)
	go one(a, b)
	go one(b, a)
	wg.Wait()
}

func portArg(name, s string, lowest int) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < lowest || p > 65535 {
		return 0, usageError{fmt.Errorf("%s %q: want a number from %d to 65535", name, s, lowest)}
	}
	return p, nil
}
