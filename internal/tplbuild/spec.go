// Package tplbuild builds templates from steps, as E2B's Template SDK
// describes them: each build runs in a sandbox started from its parent,
// every step is a command in it, and a files snapshot after each step is
// the step cache. A build's result is the snapshot after its last step;
// sandboxes of the template start from it.
package tplbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Step is one instruction of a template (the SDK's serialized form).
type Step struct {
	Type            string   `json:"type"`
	Args            []string `json:"args"`
	Force           bool     `json:"force,omitempty"`
	FilesHash       string   `json:"filesHash,omitempty"`
	ForceUpload     bool     `json:"forceUpload,omitempty"`
	ResolveSymlinks bool     `json:"resolveSymlinks,omitempty"`
	Gzip            *bool    `json:"gzip,omitempty"`
}

// Spec is what POST /v2/templates/{id}/builds/{buildID} carries, and what
// `warren template build --file` reads (the SDK's Template.toJSON).
type Spec struct {
	FromTemplate      string          `json:"fromTemplate,omitempty"`
	FromImage         string          `json:"fromImage,omitempty"`
	FromImageRegistry json.RawMessage `json:"fromImageRegistry,omitempty"`
	StartCmd          string          `json:"startCmd,omitempty"`
	ReadyCmd          string          `json:"readyCmd,omitempty"`
	Steps             []Step          `json:"steps"`
	Force             bool            `json:"force,omitempty"`
	// Runtime is a warren extension: the runtime the build's sandbox runs
	// on ("": what the parent template requires, else the server's
	// default). On one that saves memory (gvisor) the start command is
	// snapshotted with memory once ready.
	Runtime string `json:"runtime,omitempty"`
	// AllowInternetAccess and Network are warren's extension: the build
	// sandbox's network (network.go; default: the internet).
	AllowInternetAccess *bool    `json:"allowInternetAccess,omitempty"`
	Network             *Network `json:"network,omitempty"`
}

// sdkDefaultImage is the image the SDK's Template() starts from when no
// from* is called: warren's base template stands for it.
const sdkDefaultImage = "e2bdev/base"

// maxSteps bounds one template's steps.
const maxSteps = 256

var (
	nameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
	tagRE   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)
	hashRE  = regexp.MustCompile(`^[a-f0-9]{16,128}$`)
	envKeRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ParseName splits "name" or "name:tag" and checks both.
func ParseName(ref string) (name, tag string, err error) {
	name, tag, _ = strings.Cut(ref, ":")
	if !nameRE.MatchString(name) {
		return "", "", fmt.Errorf("template name %q: want 1-63 lowercase letters, digits, '-', '_' or '.', starting with a letter or digit: %w", name, errdefs.ErrInvalid)
	}
	if strings.Contains(ref, ":") {
		if err := checkTag(tag); err != nil {
			return "", "", err
		}
	}
	return name, tag, nil
}

func checkTag(tag string) error {
	if !tagRE.MatchString(tag) {
		return fmt.Errorf("tag %q: want 1-63 letters, digits, '-', '_' or '.': %w", tag, errdefs.ErrInvalid)
	}
	return nil
}

// CheckFilesHash checks a copy's content hash (it names a stored file).
func CheckFilesHash(h string) error {
	if !hashRE.MatchString(h) {
		return fmt.Errorf("files hash %q: want lowercase hex: %w", h, errdefs.ErrInvalid)
	}
	return nil
}

// parent is the template a spec starts from, or "" when it starts from
// an image (see image).
func (s Spec) parent() (string, error) {
	switch {
	case s.FromTemplate != "" && s.FromImage != "":
		return "", fmt.Errorf("fromTemplate and fromImage both set: want one: %w", errdefs.ErrInvalid)
	case s.FromTemplate != "":
		return s.FromTemplate, nil
	case s.FromImage == sdkDefaultImage || s.FromImage == "":
		return "base", nil
	}
	_, _, err := s.image()
	return "", err
}

// Validate checks every step's type and arguments before anything runs.
func (s Spec) Validate() error {
	if _, err := s.parent(); err != nil {
		return err
	}
	if _, _, err := s.image(); err != nil {
		return err
	}
	if err := s.validateNetwork(); err != nil {
		return err
	}
	if len(s.Steps) > maxSteps {
		return fmt.Errorf("%d steps: at most %d: %w", len(s.Steps), maxSteps, errdefs.ErrInvalid)
	}
	for i, st := range s.Steps {
		if err := st.validate(); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return nil
}

func (st Step) validate() error {
	want := map[string][2]int{"RUN": {1, 2}, "COPY": {2, 4}, "WORKDIR": {1, 1}, "USER": {1, 1}, "ENV": {2, 1 << 20}}
	n, ok := want[st.Type]
	if !ok {
		return fmt.Errorf("unknown step type %q: want RUN, COPY, WORKDIR, USER or ENV: %w", st.Type, errdefs.ErrInvalid)
	}
	if len(st.Args) < n[0] || len(st.Args) > n[1] {
		return fmt.Errorf("%s takes %d to %d arguments, got %d: %w", st.Type, n[0], n[1], len(st.Args), errdefs.ErrInvalid)
	}
	switch st.Type {
	case "ENV":
		if len(st.Args)%2 != 0 {
			return fmt.Errorf("ENV takes key, value pairs: %w", errdefs.ErrInvalid)
		}
		for i := 0; i < len(st.Args); i += 2 {
			if !envKeRE.MatchString(st.Args[i]) {
				return fmt.Errorf("ENV name %q is not a variable name: %w", st.Args[i], errdefs.ErrInvalid)
			}
		}
	case "COPY":
		if err := CheckFilesHash(st.FilesHash); err != nil {
			return fmt.Errorf("COPY %s: %w", st.Args[0], err)
		}
		if len(st.Args) > 3 && st.Args[3] != "" && !regexp.MustCompile(`^[0-7]{3,4}$`).MatchString(st.Args[3]) {
			return fmt.Errorf("COPY mode %q: want octal: %w", st.Args[3], errdefs.ErrInvalid)
		}
	case "WORKDIR":
		if !strings.HasPrefix(st.Args[0], "/") && st.Args[0] != "" {
			return nil // relative to the current workdir, as in a Dockerfile
		}
	}
	for _, a := range st.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%s: an argument holds a NUL byte: %w", st.Type, errdefs.ErrInvalid)
		}
	}
	return nil
}

// stepKey is the cache key of a step: the hash of its parent's key, the
// step (without its force flags) and the hash of the files it copies.
func stepKey(parent string, st Step) string {
	h := sha256.New()
	b, _ := json.Marshal(struct {
		Type      string   `json:"type"`
		Args      []string `json:"args"`
		FilesHash string   `json:"filesHash,omitempty"`
	}{st.Type, st.Args, st.FilesHash})
	h.Write([]byte(parent))
	h.Write([]byte{0})
	h.Write(b)
	if st.Type == "WORKDIR" || st.Type == "USER" {
		// These steps also write /etc/warren/defaults (recordDefaults): a
		// cache entry from before they did must not be reused.
		h.Write([]byte("\x00defaults"))
	}
	return hex.EncodeToString(h.Sum(nil))
}
