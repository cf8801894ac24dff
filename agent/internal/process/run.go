package process

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

const (
	// chunkSize bounds one output event.
	chunkSize = 64 << 10
	// drainGrace is how long output is still read after the command exits.
	// A background child that inherited the pipes would otherwise hold the
	// call open for as long as it lives.
	drainGrace = 200 * time.Millisecond
)

// running is one started command.
type running struct {
	pid    int
	status <-chan unix.WaitStatus
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	sp     *spec
}

// start forks the command in its own process group with pipes for its
// standard streams.
func (s *Service) start(sp *spec) (r *running, err error) {
	var files []*os.File // every fd made here, closed on failure
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
		}
	}()
	pipe := func() (*os.File, *os.File, error) {
		rd, wr, err := os.Pipe()
		if err == nil {
			files = append(files, rd, wr)
		}
		return rd, wr, err
	}
	// Without stdin (and not kept open for later input) the command reads /dev/null: no pipe and no writer
	// goroutine on the hot path.
	var inR, inW *os.File
	if len(sp.stdin) > 0 || sp.keepStdin {
		if inR, inW, err = pipe(); err != nil {
			return nil, fmt.Errorf("make stdin pipe: %w", err)
		}
	} else {
		if inR, err = os.Open(os.DevNull); err != nil {
			return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
		}
		files = append(files, inR)
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("make stdout pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("make stderr pipe: %w", err)
	}
	attr := &syscall.ProcAttr{
		Dir:   sp.dir,
		Env:   sp.env,
		Files: []uintptr{inR.Fd(), outW.Fd(), errW.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Credential: sp.cred},
	}
	pid, status, err := s.reaper.Start(func() (int, error) {
		return syscall.ForkExec(sp.path, sp.argv, attr)
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", sp.argv[0], err)
	}
	// The child holds its own copies now.
	inR.Close()
	outW.Close()
	errW.Close()
	r = &running{pid: pid, status: status, stdin: inW, stdout: outR, stderr: errR, sp: sp}
	if inW != nil && !sp.keepStdin {
		go r.feedStdin()
	}
	return r, nil
}

// feedStdin writes the request's stdin and closes the pipe so the command
// sees EOF. A command that never reads stdin gets EPIPE once it exits.
func (r *running) feedStdin() {
	if len(r.sp.stdin) > 0 {
		_, _ = r.stdin.Write(r.sp.stdin)
	}
	r.stdin.Close()
}

// kill ends the command's whole process group.
func (r *running) kill() {
	_ = syscall.Kill(-r.pid, syscall.SIGKILL)
}

type chunk struct {
	stream agentv1.Stream
	data   []byte
	eof    bool
}

// readBuffers recycles read buffers: every exec reads two pipes, and fresh
// 64 KiB buffers per call would make the collector a noticeable part of a
// short command's round trip.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

func (r *running) read(f *os.File, stream agentv1.Stream, out chan<- chunk) {
	defer f.Close()
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	for {
		n, err := f.Read(buf)
		if n > 0 {
			out <- chunk{stream: stream, data: append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			out <- chunk{stream: stream, eof: true}
			return
		}
	}
}

// follow streams output until the command has exited and its pipes are
// drained, enforcing the timeout and the output cap, and killing the process
// group when the client goes away.
func (r *running) follow(ctx context.Context, stream *connect.ServerStream[agentv1.ExecEvent]) *agentv1.Exited {
	chunks := make(chan chunk, 8)
	go r.read(r.stdout, agentv1.Stream_STREAM_STDOUT, chunks)
	go r.read(r.stderr, agentv1.Stream_STREAM_STDERR, chunks)

	var timeout <-chan time.Time
	if r.sp.timeout > 0 {
		t := time.NewTimer(r.sp.timeout)
		defer t.Stop()
		timeout = t.C
	}
	var (
		exited    = &agentv1.Exited{}
		sent      uint64
		open      = 2
		status    = r.status
		done      = ctx.Done()
		clientOK  = true
		gotStatus bool
	)
	for !gotStatus || open > 0 {
		select {
		case c := <-chunks:
			if c.eof {
				open--
				continue
			}
			if !clientOK {
				continue // keep draining so the command never blocks on a full pipe
			}
			data := c.data
			if room := r.sp.limit - sent; uint64(len(data)) > room {
				data = data[:room]
				exited.OutputTruncated = true
			}
			if len(data) == 0 {
				continue
			}
			sent += uint64(len(data))
			ev := &agentv1.ExecEvent{Event: &agentv1.ExecEvent_Output{Output: &agentv1.Output{Stream: c.stream, Data: data}}}
			if err := stream.Send(ev); err != nil {
				clientOK = false
				r.kill()
			}
		case ws := <-status:
			gotStatus, status = true, nil
			fillStatus(exited, ws)
			deadline := time.Now().Add(drainGrace)
			_ = r.stdout.SetReadDeadline(deadline)
			_ = r.stderr.SetReadDeadline(deadline)
		case <-timeout:
			timeout = nil
			exited.TimedOut = true
			r.kill()
		case <-done:
			done, clientOK = nil, false
			r.kill()
		}
	}
	// A background child may still hold stdin open without reading it:
	// unblock the writer so it does not wait for it forever.
	if r.stdin != nil {
		_ = r.stdin.SetWriteDeadline(time.Now())
	}
	return exited
}

func fillStatus(e *agentv1.Exited, ws unix.WaitStatus) {
	switch {
	case ws.Signaled():
		e.ExitCode = 128 + int32(ws.Signal())
		e.Signal = ws.Signal().String()
	default:
		e.ExitCode = int32(ws.ExitStatus())
	}
}
