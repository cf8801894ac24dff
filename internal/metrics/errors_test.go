package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"testing"
)

func TestErrorsKeepsTheNewest(t *testing.T) {
	e := NewErrors(3, nil)
	for i := range 5 {
		e.Record("op", "", fmt.Sprint(i))
	}
	got := e.Recent()
	if len(got) != 3 || got[0].Message != "4" || got[2].Message != "2" {
		t.Fatalf("Recent = %+v, want messages 4, 3, 2", got)
	}
	if e.Total() != 5 {
		t.Fatalf("Total = %d, want 5", e.Total())
	}
}

func TestErrorsHandlerRecordsFailuresOnly(t *testing.T) {
	e := NewErrors(0, nil)
	var buf bytes.Buffer
	// The wrapped handler shows errors only: warnings must still be
	// recorded, and still not be printed.
	log := slog.New(e.Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError})))
	log.Info("fine", "err", errors.New("not a failure: info level"))
	log.Warn("a notice without an error")
	log.With("sandbox", "sb1").Warn("kill timed-out sandbox", "err", errors.New("busy"))
	log.Error("destroy sandbox", "sandbox", "sb2", "err", errors.New("EBUSY"))
	got := e.Recent()
	if len(got) != 2 {
		t.Fatalf("Recent = %+v, want 2 entries", got)
	}
	if got[0].Op != "destroy sandbox" || got[0].Sandbox != "sb2" || got[0].Message != "EBUSY" {
		t.Errorf("newest = %+v", got[0])
	}
	if got[1].Op != "kill timed-out sandbox" || got[1].Sandbox != "sb1" || got[1].Message != "busy" {
		t.Errorf("oldest = %+v (the sandbox comes from With)", got[1])
	}
	if out := buf.String(); bytes.Contains(buf.Bytes(), []byte("timed-out")) || !bytes.Contains(buf.Bytes(), []byte("destroy sandbox")) {
		t.Errorf("the wrapped handler's level is not kept: %q", out)
	}
}
