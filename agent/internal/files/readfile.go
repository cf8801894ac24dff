package files

import (
	"context"
	"io"
	"os"
	"syscall"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// ReadFile streams a regular file: its info first, then chunks of at most
// 1 MiB. It refuses anything but a regular file, so a FIFO or a device cannot
// hang the call or stream forever.
func (s *Service) ReadFile(ctx context.Context, req *connect.Request[agentv1.ReadFileRequest], stream *connect.ServerStream[agentv1.ReadFileResponse]) error {
	p, err := s.resolveNonEmpty("path", req.Msg.GetPath())
	if err != nil {
		return err
	}
	// O_NONBLOCK so opening a FIFO does not wait for a writer; it has no
	// effect on regular files.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return toConnect("read", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return toConnect("read", p, err)
	}
	if fi.IsDir() {
		return failedPrecondition("read %s: is a directory (use ListDir)", p)
	}
	if !fi.Mode().IsRegular() {
		return failedPrecondition("read %s: not a regular file", p)
	}
	if err := stream.Send(&agentv1.ReadFileResponse{Info: entryInfo(p, fi, s.cfg.Users.Owners())}); err != nil {
		return err
	}
	buf := make([]byte, readChunk)
	for {
		if err := ctx.Err(); err != nil {
			return connect.NewError(connect.CodeCanceled, err)
		}
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			if serr := stream.Send(&agentv1.ReadFileResponse{Data: buf[:n]}); serr != nil {
				return serr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return toConnect("read", p, err)
		}
	}
}
