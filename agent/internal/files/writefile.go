package files

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/fsops"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// WriteFile takes a header, then data chunks. The data goes to a temporary
// file beside the target, which is renamed into place only when the stream
// ends cleanly, so a cut stream never leaves a half-written file.
func (s *Service) WriteFile(ctx context.Context, stream *connect.ClientStream[agentv1.WriteFileRequest]) (*connect.Response[agentv1.WriteFileResponse], error) {
	if !stream.Receive() {
		if err := stream.Err(); err != nil {
			return nil, err
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("write: the stream is empty; send a header first"))
	}
	hdr := stream.Msg().GetHeader()
	if hdr == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("write: the first message must carry the header"))
	}
	p, err := s.resolveNonEmpty("path", hdr.GetPath())
	if err != nil {
		return nil, err
	}
	mode := os.FileMode(0o644)
	if m := hdr.GetMode(); m != 0 {
		mode = goMode(m)
	}
	uid, gid, err := s.owner(hdr.GetUser())
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return nil, failedPrecondition("write %s: a directory is there", p)
	}

	dir := filepath.Dir(p)
	var createdDirs []string
	if hdr.GetMakeParents() {
		if createdDirs, err = fsErrors.MkdirAll(dir, 0o755, uid, gid); err != nil {
			return nil, err
		}
	}
	ok := false
	defer func() {
		if !ok {
			fsops.RemoveDirs(createdDirs)
		}
	}()

	tmp, err := os.CreateTemp(dir, ".warren-write-*")
	if err != nil {
		return nil, toConnect("write", p, err)
	}
	defer func() {
		if !ok {
			tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()

	if err := receiveData(stream, tmp, p); err != nil {
		return nil, err
	}
	if err := stream.Err(); err != nil {
		return nil, err // cut stream: the target is untouched
	}
	if err := ctx.Err(); err != nil {
		return nil, connect.NewError(connect.CodeCanceled, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return nil, toConnect("chmod", p, err)
	}
	if err := tmp.Chown(uid, gid); err != nil {
		return nil, toConnect("chown", p, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, toConnect("write", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return nil, toConnect("write", p, err)
	}
	ok = true
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, toConnect("stat", p, err)
	}
	return connect.NewResponse(&agentv1.WriteFileResponse{Entry: entryInfo(p, fi, s.cfg.Users.Owners())}), nil
}

// receiveData writes the data of the stream's messages, the one received
// and those that follow, to tmp, at most MaxWriteBytes of it (p names the
// target in errors). It stops at the stream's end; the caller checks
// stream.Err.
func receiveData(stream *connect.ClientStream[agentv1.WriteFileRequest], tmp *os.File, p string) error {
	written := int64(0)
	data := stream.Msg().GetData()
	for {
		if len(data) > 0 {
			if written+int64(len(data)) > MaxWriteBytes {
				return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("write %s: larger than %d bytes; split the file", p, MaxWriteBytes))
			}
			if _, err := tmp.Write(data); err != nil {
				return toConnect("write", p, err)
			}
			written += int64(len(data))
		}
		if !stream.Receive() {
			break
		}
		if stream.Msg().GetHeader() != nil {
			return connect.NewError(connect.CodeInvalidArgument, errors.New("write: only the first message may carry a header"))
		}
		data = stream.Msg().GetData()
	}
	return nil
}
