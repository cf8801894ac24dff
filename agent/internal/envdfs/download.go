package envdfs

import (
	"compress/gzip"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sniffLen is how much of a file decides its Content-Type when its
// extension does not (as http.ServeContent does).
const sniffLen = 512

// download serves GET /files?path=: the file's bytes, gzip-compressed when
// the client accepts gzip, with envd's Content-Type and Content-Disposition.
func (s *Service) download(w http.ResponseWriter, r *http.Request) {
	c, err := s.callerOfRequest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := c.resolve(r.URL.Query().Get("path"))
	if err != nil {
		writeError(w, err)
		return
	}
	useGzip, ok := acceptsGzip(r.Header.Get("Accept-Encoding"))
	if !ok {
		writeError(w, invalidArg("Accept-Encoding %q accepts neither gzip nor identity", r.Header.Get("Accept-Encoding")))
		return
	}
	f, fi, err := openRegular(p)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	head := make([]byte, sniffLen)
	n, err := io.ReadFull(f, head)
	atEOF := err == io.EOF || err == io.ErrUnexpectedEOF
	if err != nil && !atEOF {
		writeError(w, fsError("read", p, err))
		return
	}
	head = head[:n]

	h := w.Header()
	ctype := mime.TypeByExtension(filepath.Ext(p))
	if ctype == "" {
		ctype = http.DetectContentType(head)
	}
	h.Set("Content-Type", ctype)
	h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": filepath.Base(p)}))
	h.Set("Last-Modified", fi.ModTime().UTC().Format(http.TimeFormat))
	h.Set("Vary", "Accept-Encoding")

	if useGzip {
		h.Set("Content-Encoding", "gzip")
		writeGzip(w, head, f, atEOF)
		return
	}
	writePlain(w, head, f, fi.Size(), atEOF)
}

// openRegular opens the regular file p for reading; anything else is an
// error that says what p is.
func openRegular(p string) (*os.File, os.FileInfo, error) {
	// O_NONBLOCK so a FIFO cannot hang the open; it is refused below.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fsError("read", p, err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		err = fsError("read", p, err)
	case fi.IsDir():
		err = invalidArg("read %s: path is a directory (list it instead)", p)
	case !fi.Mode().IsRegular():
		err = invalidArg("read %s: not a regular file", p)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// writeGzip sends head and the rest of f (unless atEOF) gzip-compressed.
func writeGzip(w http.ResponseWriter, head []byte, f *os.File, atEOF bool) {
	zw := gzip.NewWriter(w)
	_, err := zw.Write(head)
	if err == nil && !atEOF {
		_, err = io.Copy(zw, f)
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		// The status is sent: cut the stream so the client sees an
		// error rather than a short file.
		panic(http.ErrAbortHandler)
	}
}

// writePlain sends head and the rest of f (unless atEOF), whose size stat
// gave as size.
func writePlain(w http.ResponseWriter, head []byte, f *os.File, size int64, atEOF bool) {
	h, n := w.Header(), len(head)
	var err error
	// Files whose size stat does not know (procfs reports 0) are streamed
	// without a length; others announce it and must deliver all of it.
	switch {
	case atEOF:
		h.Set("Content-Length", strconv.Itoa(n))
	case size >= int64(n):
		h.Set("Content-Length", strconv.FormatInt(size, 10))
	default:
		size = -1
	}
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(head); err != nil || atEOF {
		return
	}
	if size >= 0 {
		_, err = io.CopyN(w, f, size-int64(n))
	} else {
		_, err = io.Copy(w, f)
	}
	if err != nil {
		panic(http.ErrAbortHandler)
	}
}

// acceptsGzip reads an Accept-Encoding header the way envd does: gzip when
// the client lists it (or accepts anything but identity) at least as much as
// an identity it names; identity it does not name is acceptable but least
// preferred. ok is false when neither is acceptable.
func acceptsGzip(header string) (useGzip, ok bool) {
	if strings.TrimSpace(header) == "" {
		return false, true
	}
	qGzip, qIdentity, qAny := -1.0, -1.0, -1.0
	for _, item := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(item, ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "gzip", "x-gzip":
			qGzip = q
		case "identity":
			qIdentity = q
		case "*":
			qAny = q
		}
	}
	identityRefused := qIdentity == 0 || (qIdentity < 0 && qAny == 0)
	if qGzip < 0 {
		qGzip = 0
		if identityRefused && qAny > 0 {
			qGzip = qAny
		}
	}
	switch {
	case qGzip > 0 && (qIdentity < 0 || qGzip >= qIdentity):
		return true, true
	case !identityRefused:
		return false, true
	default:
		return false, false
	}
}
