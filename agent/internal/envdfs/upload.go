package envdfs

import (
	"compress/gzip"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strings"
)

// uploadEntry is one element of envd's upload answer.
type uploadEntry struct {
	Path     string            `json:"path"`
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// upload serves POST /files: either multipart/form-data whose `file` parts
// each name their destination in the part's filename (the full path, which
// is why Go's Part.FileName, which strips directories, is not used), or an
// application/octet-stream body written to the `path` query. A `path` query
// overrides the part filenames. The body may be gzip-compressed
// (Content-Encoding), and X-Metadata-* headers are stored with every file.
func (s *Service) upload(w http.ResponseWriter, r *http.Request) {
	written, err := s.uploadFiles(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, written)
}

func (s *Service) uploadFiles(r *http.Request) ([]uploadEntry, error) {
	c, err := s.callerOfRequest(r)
	if err != nil {
		return nil, err
	}
	md, err := metadataFromHeaders(r.Header)
	if err != nil {
		return nil, err
	}
	body, err := decodedBody(r)
	if err != nil {
		return nil, err
	}
	queryPath, hasPath := r.URL.Query()["path"]
	ct := r.Header.Get("Content-Type")
	mediaType, params, _ := mime.ParseMediaType(ct)
	switch {
	case mediaType == "application/octet-stream":
		if !hasPath || queryPath[0] == "" {
			return nil, invalidArg("the path query parameter is required for an application/octet-stream upload")
		}
		p, err := c.resolve(queryPath[0])
		if err != nil {
			return nil, err
		}
		f, err := writeFile(p, body, c, md)
		if err != nil {
			return nil, err
		}
		return []uploadEntry{s.answer(p, f, md)}, nil
	case strings.HasPrefix(mediaType, "multipart/"):
		if params["boundary"] == "" {
			return nil, invalidArg("multipart upload without a boundary in Content-Type %q", ct)
		}
		var dest string
		if hasPath && queryPath[0] != "" {
			dest = queryPath[0]
		}
		return s.uploadParts(multipart.NewReader(body, params["boundary"]), c, dest, md)
	default:
		return nil, invalidArg("unsupported Content-Type %q: send multipart/form-data or application/octet-stream", ct)
	}
}

func (s *Service) uploadParts(mr *multipart.Reader, c caller, dest string, md map[string]string) ([]uploadEntry, error) {
	var out []uploadEntry
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, invalidArg("reading the multipart body failed: %v", err)
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		name := dest
		if name == "" {
			if name, err = fullFileName(part); err != nil {
				part.Close()
				return nil, err
			}
		}
		p, err := c.resolve(name)
		if err != nil {
			part.Close()
			return nil, err
		}
		for _, e := range out {
			if e.Path == p {
				part.Close()
				return nil, invalidArg("two parts of one upload name the same path %s; only the first was written", p)
			}
		}
		f, err := writeFile(p, part, c, md)
		part.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, s.answer(p, f, md))
	}
	if len(out) == 0 {
		return nil, invalidArg("the multipart upload has no part named \"file\"")
	}
	return out, nil
}

// fullFileName is the part's Content-Disposition filename, directories kept.
func fullFileName(part *multipart.Part) (string, error) {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return "", invalidArg("a file part has a malformed Content-Disposition: %v", err)
	}
	name := params["filename"]
	if name == "" {
		return "", invalidArg("a file part has no filename and no path query parameter was given: name the destination in one of them")
	}
	return name, nil
}

func (s *Service) answer(p string, f writtenFile, asked map[string]string) uploadEntry {
	if len(asked) > 0 && f.metadata == nil {
		s.log.Warn("file metadata not stored: the filesystem has no user extended attributes", "path", p)
	}
	return uploadEntry{Path: p, Name: filepath.Base(p), Type: "file", Metadata: f.metadata}
}

// decodedBody undoes a gzip Content-Encoding.
func decodedBody(r *http.Request) (io.Reader, error) {
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	switch enc {
	case "", "identity":
		return r.Body, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, invalidArg("the body is not valid gzip: %v", err)
		}
		return zr, nil
	default:
		return nil, invalidArg("unsupported Content-Encoding %q: send gzip or no encoding", enc)
	}
}
