// Package secrets keeps a team's secrets (E2B's /secrets): values sealed at
// rest (keyring.go), write-only through every API, resolved only by the
// egress proxy for the hosts a secret allows. Placeholders of the form
// ${e2b.secrets.<name>} stand for a value wherever a sandbox may see text.
package secrets

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/store"
)

// Bounds on what a request may store.
const (
	MaxNameLen       = 256
	MaxValueLen      = 64 << 10
	maxMetadata      = 64
	maxMetadataKey   = 256
	maxMetadataValue = 1024
	maxAllowedHosts  = 64
)

// Value is a secret's plaintext. Its String and LogValue never show it, so
// a value that reaches a format string or a log line by mistake stays
// hidden; Reveal is the one way to read it.
type Value struct{ b []byte }

func (v Value) String() string               { return "[secret]" }
func (v Value) LogValue() slog.Value         { return slog.StringValue("[secret]") }
func (v Value) GoString() string             { return "[secret]" }
func (v Value) Reveal() string               { return string(v.b) }
func (v Value) Len() int                     { return len(v.b) }
func NewValue(s string) Value                { return Value{b: []byte(s)} }
func (v Value) MarshalJSON() ([]byte, error) { return []byte(`"[secret]"`), nil }

// Store is what the service needs of the metadata store.
type Store interface {
	CreateSecret(ctx context.Context, rec store.Secret, seal store.SealFunc) (store.Secret, error)
	AddSecretVersion(ctx context.Context, team, ref string, ch store.SecretChange, seal store.SealFunc) (store.Secret, error)
	GetSecret(ctx context.Context, team, ref string) (store.Secret, error)
	SealedSecret(ctx context.Context, team, name string) (store.Secret, []byte, error)
	ListSecrets(ctx context.Context, team, after string, limit int) ([]store.Secret, error)
	DeleteSecret(ctx context.Context, team, ref string) (store.Secret, error)
}

// Service creates, versions, lists and deletes secrets, and resolves them
// for the egress proxy.
type Service struct {
	store Store
	keys  *Keyring
}

func NewService(st Store, keys *Keyring) *Service { return &Service{store: st, keys: keys} }

// New is a secret to create.
type New struct {
	Name         string
	Value        Value
	Metadata     map[string]string
	AllowedHosts []string
}

// Update is a new version: the value, and optionally new metadata and
// allowed hosts (nil keeps them).
type Update struct {
	Value        Value
	Metadata     map[string]string
	AllowedHosts []string
	// SetMetadata and SetAllowedHosts replace the field even when nil.
	SetMetadata, SetAllowedHosts bool
}

// Create stores a new secret as version 1.
func (s *Service) Create(ctx context.Context, team string, n New) (store.Secret, error) {
	name, err := CheckName(n.Name)
	if err != nil {
		return store.Secret{}, err
	}
	if err := checkValue(n.Value); err != nil {
		return store.Secret{}, err
	}
	if err := checkMetadata(n.Metadata); err != nil {
		return store.Secret{}, err
	}
	hosts, err := CheckHostPatterns("allowedHosts", n.AllowedHosts)
	if err != nil {
		return store.Secret{}, err
	}
	rec := store.Secret{ID: "sec_" + ids.New(20), Team: team, Name: name, Metadata: n.Metadata, AllowedHosts: hosts}
	return s.store.CreateSecret(ctx, rec, s.sealer(team, n.Value))
}

// Update stores a new version of a team's secret (by id or name).
func (s *Service) Update(ctx context.Context, team, ref string, u Update) (store.Secret, error) {
	if err := checkValue(u.Value); err != nil {
		return store.Secret{}, err
	}
	if err := checkMetadata(u.Metadata); err != nil {
		return store.Secret{}, err
	}
	hosts, err := CheckHostPatterns("allowedHosts", u.AllowedHosts)
	if err != nil {
		return store.Secret{}, err
	}
	ch := store.SecretChange{Metadata: u.Metadata, AllowedHosts: hosts,
		HasMetadata: u.SetMetadata || u.Metadata != nil, HasAllowedHosts: u.SetAllowedHosts || u.AllowedHosts != nil}
	return s.store.AddSecretVersion(ctx, team, ref, ch, s.sealer(team, u.Value))
}

func (s *Service) sealer(team string, v Value) store.SealFunc {
	return func(id string, version int) ([]byte, error) { return s.keys.Seal(team, id, version, v.b) }
}

// Get returns a team's secret's metadata (never its value).
func (s *Service) Get(ctx context.Context, team, ref string) (store.Secret, error) {
	return s.store.GetSecret(ctx, team, ref)
}

// List pages a team's secrets by name.
func (s *Service) List(ctx context.Context, team, after string, limit int) ([]store.Secret, error) {
	return s.store.ListSecrets(ctx, team, after, limit)
}

// Delete removes a team's secret and every version of it.
func (s *Service) Delete(ctx context.Context, team, ref string) (store.Secret, error) {
	return s.store.DeleteSecret(ctx, team, ref)
}

// Resolved is a secret's current value with what decides where it may go.
type Resolved struct {
	Name         string
	Version      int
	AllowedHosts []string
	Value        Value
}

// Resolve returns the current value of a team's secret by name, for the
// egress proxy.
func (s *Service) Resolve(ctx context.Context, team, name string) (Resolved, error) {
	rec, sealed, err := s.store.SealedSecret(ctx, team, strings.ToLower(name))
	if err != nil {
		return Resolved{}, err
	}
	b, err := s.keys.Open(team, rec.ID, rec.Version, sealed)
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{Name: rec.Name, Version: rec.Version, AllowedHosts: rec.AllowedHosts, Value: Value{b: b}}, nil
}

// CheckName validates a secret's name as E2B does (not empty, no '{', '}'
// or control characters) and returns it lower-cased.
func CheckName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("secret name is empty: %w", errdefs.ErrInvalid)
	}
	if len(name) > MaxNameLen || !utf8.ValidString(name) {
		return "", fmt.Errorf("secret name must be valid UTF-8 of at most %d bytes: %w", MaxNameLen, errdefs.ErrInvalid)
	}
	if strings.HasPrefix(name, "sec_") {
		return "", fmt.Errorf("secret name %q: names may not start with sec_ (that is how ids start): %w", name, errdefs.ErrInvalid)
	}
	for _, r := range name {
		if r == '{' || r == '}' || unicode.IsControl(r) || unicode.IsSpace(r) {
			return "", fmt.Errorf("secret name %q: '{', '}', spaces and control characters are not allowed: %w", strings.ToValidUTF8(strings.Map(printable, name), "?"), errdefs.ErrInvalid)
		}
	}
	return strings.ToLower(name), nil
}

func printable(r rune) rune {
	if unicode.IsControl(r) {
		return '?'
	}
	return r
}

func checkValue(v Value) error {
	if v.Len() == 0 {
		return fmt.Errorf("secret value is empty: %w", errdefs.ErrInvalid)
	}
	if v.Len() > MaxValueLen {
		return fmt.Errorf("secret value is %d bytes, at most %d are allowed: %w", v.Len(), MaxValueLen, errdefs.ErrInvalid)
	}
	return nil
}

func checkMetadata(m map[string]string) error {
	if len(m) > maxMetadata {
		return fmt.Errorf("secret metadata has %d entries, at most %d are allowed: %w", len(m), maxMetadata, errdefs.ErrInvalid)
	}
	for k, v := range m {
		if k == "" || len(k) > maxMetadataKey || len(v) > maxMetadataValue || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("secret metadata: keys must be 1 to %d bytes and values at most %d, valid UTF-8: %w", maxMetadataKey, maxMetadataValue, errdefs.ErrInvalid)
		}
	}
	return nil
}
