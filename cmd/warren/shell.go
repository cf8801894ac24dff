package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/warrenhq/warren/client"
)

func shellCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "shell ID",
		Short: "Open an interactive shell on a terminal in a sandbox",
		Long: `Run a login shell on a terminal (a PTY the sandbox's agent opens) and join it
to this one, as the dashboard's terminal does (GET /sandboxes/{id}/terminal,
a WebSocket). Window size changes follow; Ctrl-C goes to the sandbox. Exits
with the shell's exit code.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			c := a.client()
			// A wrong id or key fails here with the API's words.
			if _, err := c.Sandboxes.Get(ctx, argv[0]); err != nil {
				return err
			}
			fd := int(os.Stdin.Fd())
			isTTY := a.in == os.Stdin && term.IsTerminal(fd)
			cols, rows := 80, 24
			if isTTY {
				if w, h, err := term.GetSize(fd); err == nil {
					cols, rows = w, h
				}
			}
			t, err := c.Sandboxes.Terminal(ctx, argv[0], cols, rows)
			if err != nil {
				return err
			}
			defer t.Close()
			if isTTY {
				old, err := term.MakeRaw(fd)
				if err != nil {
					return fmt.Errorf("put the terminal in raw mode: %w", err)
				}
				defer term.Restore(fd, old) //nolint:errcheck // best effort on the way out
				stop := followWindowSize(fd, t)
				defer stop()
			}
			go func() { _, _ = io.Copy(t, a.in) }()
			return a.shellOutput(t)
		},
	}
}

// shellOutput copies the terminal's output until the shell exits.
func (a *app) shellOutput(t *client.Terminal) error {
	for {
		data, exit, err := t.Next()
		switch {
		case err != nil:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("terminal: %w", err)
		case exit != nil && exit.Error != "":
			return fmt.Errorf("terminal: %s", exit.Error)
		case exit != nil:
			if exit.Code != 0 {
				return exitError{code: exit.Code & 0xff}
			}
			return nil
		}
		if _, err := a.out.Write(data); err != nil {
			return err
		}
	}
}

// followWindowSize resizes the remote terminal on SIGWINCH.
func followWindowSize(fd int, t *client.Terminal) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ch:
				if w, h, err := term.GetSize(fd); err == nil {
					_ = t.Resize(w, h)
				}
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}
