package commands

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

const (
	// MaxPathLen bounds a path inside a sandbox.
	MaxPathLen = 4096
	// MaxListDepth bounds how deep a listing goes.
	MaxListDepth = 16
	chunkSize    = 1 << 20
)

// CheckPath checks a path inside a sandbox for shape only: the agent
// resolves it inside the sandbox, where `..` cannot leave the root. what
// names it in the error.
func CheckPath(what, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%s (a path inside the sandbox) is missing: %w", what, errdefs.ErrInvalid)
	case len(p) > MaxPathLen:
		return fmt.Errorf("%s is longer than %d bytes: %w", what, MaxPathLen, errdefs.ErrInvalid)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%s holds a NUL byte: %w", what, errdefs.ErrInvalid)
	}
	return nil
}

// fileCall admits a file call on path into a team's sandbox and runs it.
func fileCall[T any](ctx context.Context, s *Service, team, id, path string, call func(files agentv1connect.FilesServiceClient) (T, error)) (T, error) {
	var zero T
	if err := CheckPath("path", path); err != nil {
		return zero, err
	}
	agent, release, err := s.sessions.Acquire(ctx, team, id)
	if err != nil {
		return zero, err
	}
	defer release()
	return call(agent.Files())
}

// Stat describes a file in a team's sandbox.
func (s *Service) Stat(ctx context.Context, team, id, path string) (client.EntryInfo, error) {
	return fileCall(ctx, s, team, id, path, func(f agentv1connect.FilesServiceClient) (client.EntryInfo, error) {
		res, err := f.Stat(ctx, connect.NewRequest(&agentv1.StatRequest{Path: path}))
		if err != nil {
			return client.EntryInfo{}, err
		}
		return entryOf(res.Msg.GetEntry()), nil
	})
}

// ListDir lists a directory to depth levels (1..MaxListDepth).
func (s *Service) ListDir(ctx context.Context, team, id, path string, depth uint32) ([]client.EntryInfo, error) {
	if depth < 1 || depth > MaxListDepth {
		return nil, fmt.Errorf("depth %d: want 1..%d: %w", depth, MaxListDepth, errdefs.ErrInvalid)
	}
	return fileCall(ctx, s, team, id, path, func(f agentv1connect.FilesServiceClient) ([]client.EntryInfo, error) {
		res, err := f.ListDir(ctx, connect.NewRequest(&agentv1.ListDirRequest{Path: path, Depth: depth}))
		if err != nil {
			return nil, err
		}
		out := make([]client.EntryInfo, 0, len(res.Msg.GetEntries()))
		for _, e := range res.Msg.GetEntries() {
			out = append(out, entryOf(e))
		}
		return out, nil
	})
}

// MakeDir makes a directory (and its parents), owned by user ("" = the
// agent's default).
func (s *Service) MakeDir(ctx context.Context, team, id, path, user string) (client.EntryInfo, error) {
	return fileCall(ctx, s, team, id, path, func(f agentv1connect.FilesServiceClient) (client.EntryInfo, error) {
		res, err := f.MakeDir(ctx, connect.NewRequest(&agentv1.MakeDirRequest{Path: path, User: user}))
		if err != nil {
			return client.EntryInfo{}, err
		}
		return entryOf(res.Msg.GetEntry()), nil
	})
}

// Remove removes a file or a directory tree.
func (s *Service) Remove(ctx context.Context, team, id, path string) error {
	_, err := fileCall(ctx, s, team, id, path, func(f agentv1connect.FilesServiceClient) (struct{}, error) {
		_, err := f.Remove(ctx, connect.NewRequest(&agentv1.RemoveRequest{Path: path}))
		return struct{}{}, err
	})
	return err
}

// Move renames a file or directory.
func (s *Service) Move(ctx context.Context, team, id, source, destination string) (client.EntryInfo, error) {
	if err := CheckPath("source", source); err != nil {
		return client.EntryInfo{}, err
	}
	return fileCall(ctx, s, team, id, destination, func(f agentv1connect.FilesServiceClient) (client.EntryInfo, error) {
		res, err := f.Move(ctx, connect.NewRequest(&agentv1.MoveRequest{Source: source, Destination: destination}))
		if err != nil {
			return client.EntryInfo{}, err
		}
		return entryOf(res.Msg.GetEntry()), nil
	})
}

// FileReader is a file being read from a sandbox, as the agent streams it.
type FileReader struct {
	stream  *connect.ServerStreamForClient[agentv1.ReadFileResponse]
	release func()
	meter   *session.ActivityMeter
	size    int64 // announced; -1: unknown
	read    int64
	first   []byte
	done    bool
}

// ReadFile opens a file in a team's sandbox. Errors (not found, a
// directory) come before any byte, so a caller can still answer them.
// Close it when done.
func (s *Service) ReadFile(ctx context.Context, team, id, path string) (*FileReader, error) {
	if err := CheckPath("path", path); err != nil {
		return nil, err
	}
	agent, release, err := s.sessions.Acquire(ctx, team, id)
	if err != nil {
		return nil, err
	}
	stream, err := agent.Files().ReadFile(ctx, connect.NewRequest(&agentv1.ReadFileRequest{Path: path}))
	if err != nil {
		release()
		return nil, err
	}
	f := &FileReader{stream: stream, release: release, meter: s.sessions.ActivityMeter(id), size: -1}
	// The first message carries the file's info.
	if !stream.Receive() {
		err := stream.Err()
		if err == nil {
			err = fmt.Errorf("the sandbox's agent sent nothing: %w", errdefs.ErrUnavailable)
		}
		f.Close()
		return nil, err
	}
	first := stream.Msg()
	// The agent reads to EOF, so what arrives can differ from the size stat
	// gave: procfs and sysfs report 0 for files that have content, and a
	// file may grow or shrink while it is read. A known size is delivered
	// exactly (the file as it was when stat'ed, cut there if it grew); a
	// zero size is streamed to its end.
	if info := first.GetInfo(); info != nil && info.GetSize() > 0 {
		f.size = info.GetSize()
	}
	f.first = first.GetData()
	return f, nil
}

// Size is the file's size when it was opened, or -1 if unknown (streamed
// to its end).
func (f *FileReader) Size() int64 { return f.size }

// Next returns the file's next bytes; io.EOF once all were read. Any other
// error means the file could not be read to its end: the bytes already
// returned are not the whole file.
func (f *FileReader) Next() ([]byte, error) {
	for !f.done {
		var data []byte
		if f.first != nil {
			data, f.first = f.first, nil
		} else if f.size < 0 || f.read < f.size {
			if !f.stream.Receive() {
				f.done = true
				break
			}
			data = f.stream.Msg().GetData()
		} else {
			f.done = true
			break
		}
		if f.size >= 0 && f.read+int64(len(data)) > f.size {
			data = data[:f.size-f.read]
		}
		f.read += int64(len(data))
		if len(data) > 0 {
			// A download slower than the idle timeout keeps the sandbox
			// running.
			f.meter.Note()
			return data, nil
		}
	}
	if err := f.stream.Err(); err != nil {
		return nil, err
	}
	if f.size >= 0 && f.read < f.size {
		return nil, fmt.Errorf("the file shrank to %d of the %d bytes announced while it was read", f.read, f.size)
	}
	return nil, io.EOF
}

// Close ends the read and its admission.
func (f *FileReader) Close() {
	_ = f.stream.Close()
	f.release()
}

// WriteFileRequest says where and how a file is written.
type WriteFileRequest struct {
	Path        string
	Mode        uint32
	User        string
	MakeParents bool
}

// WriteFile writes body to a file in a team's sandbox, in chunks as it
// comes. The file appears whole or not at all: an error reading body
// (the caller's upload cut short, or over its limit) abandons it and is
// returned as it is.
func (s *Service) WriteFile(ctx context.Context, team, id string, req WriteFileRequest, body io.Reader) (client.EntryInfo, error) {
	if err := CheckPath("path", req.Path); err != nil {
		return client.EntryInfo{}, err
	}
	if req.Mode > 0o7777 {
		return client.EntryInfo{}, fmt.Errorf("mode %o: want permission bits such as 0644: %w", req.Mode, errdefs.ErrInvalid)
	}
	agent, release, err := s.sessions.Acquire(ctx, team, id)
	if err != nil {
		return client.EntryInfo{}, err
	}
	defer release()
	// Cancelling the stream is what abandons an upload: a stream closed
	// in order would have the agent keep what it got so far.
	ctx, abandon := context.WithCancel(ctx)
	defer abandon()
	stream := agent.Files().WriteFile(ctx)
	err = stream.Send(&agentv1.WriteFileRequest{Header: &agentv1.WriteFileHeader{
		Path: req.Path, Mode: req.Mode, User: req.User, MakeParents: req.MakeParents,
	}})
	// An upload slower than the idle timeout keeps the sandbox running.
	meter := s.sessions.ActivityMeter(id)
	buf := make([]byte, chunkSize)
	for err == nil {
		n, rerr := body.Read(buf)
		if n > 0 {
			meter.Note()
			err = stream.Send(&agentv1.WriteFileRequest{Data: buf[:n]})
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			abandon() // the agent drops its temporary file
			_, _ = stream.CloseAndReceive()
			return client.EntryInfo{}, rerr
		}
	}
	// A Send error means the agent ended the stream; its reason comes from
	// CloseAndReceive.
	res, err := stream.CloseAndReceive()
	if err != nil {
		return client.EntryInfo{}, err
	}
	return entryOf(res.Msg.GetEntry()), nil
}

func entryOf(e *agentv1.EntryInfo) client.EntryInfo {
	if e == nil {
		return client.EntryInfo{}
	}
	t := "other"
	switch e.GetType() {
	case agentv1.FileType_FILE_TYPE_FILE:
		t = "file"
	case agentv1.FileType_FILE_TYPE_DIRECTORY:
		t = "dir"
	case agentv1.FileType_FILE_TYPE_SYMLINK:
		t = "symlink"
	}
	return client.EntryInfo{
		Name:          e.GetName(),
		Path:          e.GetPath(),
		Type:          t,
		Size:          e.GetSize(),
		Mode:          e.GetMode(),
		Permissions:   os.FileMode(e.GetMode() & 0o777).String(),
		Owner:         e.GetOwner(),
		Group:         e.GetGroup(),
		ModifiedTime:  time.Unix(0, e.GetModifiedUnixNano()).UTC(),
		SymlinkTarget: e.GetSymlinkTarget(),
	}
}
