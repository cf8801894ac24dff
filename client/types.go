package client

import (
	"net/http"
	"time"
)

// The JSON shapes of warren's REST API. Sandbox, SandboxDetail, ListedSandbox,
// NewSandbox and Error follow E2B's control-plane API (field names and
// meaning), so the E2B SDKs and warren's own CLI read the same answers;
// warren's additions are extra fields and extra endpoints.

// Error is every error answer: {"code": <http status>, "message": "..."}.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// PlaneError is the sandbox plane's answer (a 502) for a sandbox that is
// not there (killed, timed out, never made): E2B's proxy's shape and
// words, which its SDKs show.
type PlaneError struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	SandboxID string `json:"sandboxId"`
}

// SandboxGone is the PlaneError for sandbox id.
func SandboxGone(id string) PlaneError {
	return PlaneError{Code: http.StatusBadGateway, Message: "The sandbox was not found", SandboxID: id}
}

// TrafficTokenRefused is the PlaneError (a 403) for a request to a private
// sandbox's port without its traffic access token (missing) or with a
// wrong one: E2B's proxy's words.
func TrafficTokenRefused(id string, missing bool) PlaneError {
	msg := "Sandbox is secured with traffic access token. Provided token is invalid."
	if missing {
		msg = "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing"
	}
	return PlaneError{Code: http.StatusForbidden, Message: msg, SandboxID: id}
}

// Limits are a sandbox's resource limits. Zero fields take the server's
// defaults (512 MiB, 1 CPU, 1024 pids).
type Limits struct {
	MemoryMB int64 `json:"memoryMB,omitempty"`
	// DiskMB caps the space the sandbox may write (its snapshots
	// included); 0 = no cap.
	DiskMB int64 `json:"diskMB,omitempty"`
	// CPUCount may be fractional (0.5 = half a CPU).
	CPUCount float64 `json:"cpuCount,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
}

// NewSandbox is the body of POST /sandboxes and POST /v2/sandboxes.
type NewSandbox struct {
	TemplateID string            `json:"templateID,omitempty"`
	Timeout    *int64            `json:"timeout,omitempty"` // seconds; default 300; 0 = never
	Metadata   map[string]string `json:"metadata,omitempty"`
	EnvVars    map[string]string `json:"envVars,omitempty"`
	// AutoPause pauses the sandbox when its run timeout fires instead of
	// killing it; AutoResume resumes a paused sandbox on any call that
	// needs it (E2B's fields).
	AutoPause  bool        `json:"autoPause,omitempty"`
	AutoResume *AutoResume `json:"autoResume,omitempty"`
	// AutoPauseMemory false makes the auto-pause keep only the files: the
	// processes end and the next connect boots the sandbox cold (absent or
	// true: the memory is kept). It cannot go with AutoResume.
	AutoPauseMemory *bool `json:"autoPauseMemory,omitempty"`
	// Secure is accepted for older SDKs; every warren sandbox is secure
	// (its envd API takes only its access token).
	Secure *bool `json:"secure,omitempty"`
	// AllowInternetAccess gives the sandbox a network with default-allow
	// egress (E2B's allow_internet_access). Unset or false, and no
	// network allowOut/denyOut: no network at all (loopback only).
	AllowInternetAccess *bool `json:"allow_internet_access,omitempty"`
	// Network: allowPublicTraffic (true: the sandbox's ports take requests
	// without its tokens or an API key) and the egress lists allowOut and
	// denyOut (either one gives the sandbox a network).
	Network *Network `json:"network,omitempty"`
	// VolumeMounts mounts shared volumes (POST /volumes) read-write, by
	// name, at absolute paths inside the sandbox.
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`
	// warren extensions
	// Devices are host devices by CDI name (vendor.com/class=name, GET
	// /devices lists them), held until the sandbox's delete; a fork asks
	// for its own.
	Devices []string `json:"devices,omitempty"`
	Limits  *Limits  `json:"limits,omitempty"`
	// SnapshotEveryToolCall takes a turn snapshot after every tool call
	// (POST /sandboxes/{id}/tools/{name}), as if each asked for turn.
	SnapshotEveryToolCall bool `json:"snapshotEveryToolCall,omitempty"`
	// Runtime runs the sandbox: "native" (namespaces) or "gvisor" (gVisor's
	// kernel: stronger isolation). Empty: the server's default; a fork
	// keeps its parent's. GET /health lists the runtimes available.
	Runtime string `json:"runtime,omitempty"`
	// FilesOnly starts a sandbox made from a snapshot taken with memory
	// from the snapshot's files alone: fresh processes, on any runtime.
	FilesOnly bool `json:"filesOnly,omitempty"`
	// IdempotencyKey is sent as the Idempotency-Key header, not in the
	// body: creates with the same key (per team, within 24 hours) make one
	// sandbox, and a retry gets the first one's.
	IdempotencyKey string `json:"-"`
}

// Network is E2B's network settings of a sandbox.
type Network struct {
	AllowPublicTraffic *bool `json:"allowPublicTraffic,omitempty"`
	// AllowOut and DenyOut are egress rules: IPv4 addresses, CIDR blocks,
	// domain names or *.wildcard names. Deny wins over allow; denyOut
	// 0.0.0.0/0 means "nothing but allowOut". Link-local and metadata
	// addresses, private ranges, the host and other sandboxes are always
	// denied unless the operator permits a range.
	AllowOut []string `json:"allowOut,omitempty"`
	DenyOut  []string `json:"denyOut,omitempty"`
	// MaskRequestHost is the Host header a request to one of the
	// sandbox's ports carries to the server inside, "${PORT}" standing
	// for the port (e.g. "localhost:${PORT}" for a dev server that checks
	// Host); empty keeps the caller's.
	MaskRequestHost string `json:"maskRequestHost,omitempty"`
	// Rules are E2B's network rules: per domain ("api.example.com" or
	// "*.example.com"), header transforms the egress proxy applies to the
	// sandbox's HTTP(S) requests. A rule never allows a host by itself.
	Rules map[string][]NetworkRule `json:"rules,omitempty"`
	// EgressProxy tunnels the sandbox's allowed TCP through a SOCKS5
	// server (E2B's egressProxy); egress fails when it is unreachable.
	EgressProxy *EgressProxy `json:"egressProxy,omitempty"`
}

// EgressProxy is a SOCKS5 upstream (RFC 1928, RFC 1929 auth). Answers
// never carry the password.
type EgressProxy struct {
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// NetworkRule is one rule of a domain.
type NetworkRule struct {
	Transform *NetworkTransform `json:"transform,omitempty"`
}

// NetworkTransform sets request headers; values may hold secrets'
// placeholders (see Placeholder).
type NetworkTransform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// AutoResume is E2B's autoResume setting.
type AutoResume struct {
	Enabled bool `json:"enabled"`
}

// Sandbox is the answer to a create.
type Sandbox struct {
	TemplateID      string `json:"templateID"`
	SandboxID       string `json:"sandboxID"`
	ClientID        string `json:"clientID"`
	EnvdVersion     string `json:"envdVersion"`
	EnvdAccessToken string `json:"envdAccessToken,omitempty"`
	// TrafficAccessToken opens the sandbox's ports (header
	// e2b-traffic-access-token); absent when its ports are public.
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
	Domain             string `json:"domain,omitempty"`
	Alias              string `json:"alias,omitempty"`
}

// SandboxDetail is the answer to GET /sandboxes/{id}.
type SandboxDetail struct {
	Sandbox
	StartedAt  time.Time         `json:"startedAt"`
	EndAt      *time.Time        `json:"endAt,omitempty"`
	State      string            `json:"state"`
	CPUCount   float64           `json:"cpuCount"`
	MemoryMB   int64             `json:"memoryMB"`
	DiskSizeMB int64             `json:"diskSizeMB"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	AutoPause  bool              `json:"autoPause,omitempty"`
	AutoResume bool              `json:"autoResume,omitempty"`
	// AutoPauseMemory is false when the auto-pause keeps only the files.
	AutoPauseMemory *bool `json:"autoPauseMemory,omitempty"`
	// warren extensions
	Pids int64 `json:"pids"`
	// DiskUsedBytes is the space charged to the sandbox (its writes and
	// snapshots), when the storage can tell; -1 otherwise.
	DiskUsedBytes int64  `json:"diskUsedBytes"`
	Family        string `json:"family,omitempty"`
	ForkedFrom    string `json:"forkedFrom,omitempty"`
	Head          string `json:"head,omitempty"`
	Turn          int    `json:"turn,omitempty"`
	// AllowInternetAccess and Network report a networked sandbox's egress
	// policy (both absent: no network).
	AllowInternetAccess *bool    `json:"allowInternetAccess,omitempty"`
	Network             *Network `json:"network,omitempty"`
	// Events are the sandbox's latest lifecycle events (at most 10).
	Events  []SandboxEvent `json:"events,omitempty"`
	Runtime string         `json:"runtime"`
	Reason  string         `json:"reason,omitempty"`
	// MemorySnapshot: its runtime can save its memory (snapshots with
	// memory, hibernation, forks that carry on its processes).
	MemorySnapshot bool `json:"memorySnapshot"`
	// VolumeMounts are the shared volumes it mounts.
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`
	// Devices are the host devices (CDI names) it holds (GET
	// /sandboxes/{id} only).
	Devices []string `json:"devices,omitempty"`
	// Node is the fleet node that holds it, in a fleet gateway's lists.
	Node string `json:"node,omitempty"`
}

// ListedSandbox is one element of GET /sandboxes and GET /v2/sandboxes.
type ListedSandbox = SandboxDetail

// ExecRequest is the body of POST /sandboxes/{id}/exec (a warren extension;
// the E2B SDKs run commands through the envd protocol instead).
type ExecRequest struct {
	// Cmd is an argv; Command is a shell command run with `bash -lc`.
	// Exactly one is set.
	Cmd     []string          `json:"cmd,omitempty"`
	Command string            `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	User    string            `json:"user,omitempty"`
	Stdin   []byte            `json:"stdin,omitempty"` // base64 in JSON
	// Turn takes a turn snapshot when the command finishes; its id comes
	// back in the exit event (or ExecResult).
	Turn bool `json:"turn,omitempty"`
	// TimeoutMs kills the command after this long (0 = no timeout).
	TimeoutMs uint32 `json:"timeoutMs,omitempty"`
	// OutputLimit caps stdout+stderr in bytes (0 = the server's default).
	OutputLimit uint64 `json:"outputLimit,omitempty"`
}

// ExecEvent is one line of the NDJSON stream POST /sandboxes/{id}/exec
// answers with. Type is "start", "stdout", "stderr" or "exit".
type ExecEvent struct {
	Type string `json:"type"`
	PID  int32  `json:"pid,omitempty"`
	Data []byte `json:"data,omitempty"` // base64 in JSON
	// Set on "exit".
	ExitCode        *int32 `json:"exitCode,omitempty"`
	Signal          string `json:"signal,omitempty"`
	TimedOut        bool   `json:"timedOut,omitempty"`
	OutputTruncated bool   `json:"outputTruncated,omitempty"`
	Error           string `json:"error,omitempty"`
	// SnapshotID of the turn snapshot taken when the request asked for one.
	SnapshotID string `json:"snapshotID,omitempty"`
}

// ExecResult is the answer of POST /sandboxes/{id}/exec?wait=true: the whole
// output at once.
type ExecResult struct {
	PID             int32  `json:"pid"`
	ExitCode        int32  `json:"exitCode"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	Signal          string `json:"signal,omitempty"`
	TimedOut        bool   `json:"timedOut,omitempty"`
	OutputTruncated bool   `json:"outputTruncated,omitempty"`
	Error           string `json:"error,omitempty"`
	SnapshotID      string `json:"snapshotID,omitempty"`
}

// EntryInfo describes one file in a sandbox.
type EntryInfo struct {
	Name          string    `json:"name"`
	Path          string    `json:"path"`
	Type          string    `json:"type"` // "file", "dir", "symlink", "other"
	Size          int64     `json:"size"`
	Mode          uint32    `json:"mode"`
	Permissions   string    `json:"permissions"`
	Owner         string    `json:"owner"`
	Group         string    `json:"group"`
	ModifiedTime  time.Time `json:"modifiedTime"`
	SymlinkTarget string    `json:"symlinkTarget,omitempty"`
}

// MoveRequest is the body of POST /sandboxes/{id}/files/move.
type MoveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// Template describes one template.
type Template struct {
	TemplateID string    `json:"templateID"`
	Source     string    `json:"source,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	SizeBytes  int64     `json:"sizeBytes"`
	// Runtime is the runtime every sandbox of the template runs on
	// (absent: any, the create's or the server's default).
	Runtime string `json:"runtime,omitempty"`
	// NoNewPrivileges: the template's sandboxes start with no_new_privs,
	// so sudo and other setuid binaries do not work in them.
	NoNewPrivileges bool `json:"noNewPrivileges,omitempty"`
	// Devices are the host devices (CDI names) its sandboxes get when
	// their create asks for none.
	Devices []string `json:"devices,omitempty"`
	// A template built from steps (source "build", E2B's Template SDK)
	// has its aliases (its name), tags, last build and that build's
	// status, how many builds it had and how many steps of the last one
	// came from the step cache.
	Aliases []string `json:"aliases,omitempty"`
	Names   []string `json:"names,omitempty"` // as E2B's: the aliases again
	Tags    []string `json:"tags,omitempty"`
	BuildID string   `json:"buildID,omitempty"`
	// BuildStatus: waiting, building, ready or error.
	BuildStatus string `json:"buildStatus,omitempty"`
	BuildCount  int    `json:"buildCount,omitempty"`
	CachedSteps int    `json:"cachedSteps,omitempty"`
	// StartMode: for a built template with a start command, whether it is
	// snapshotted with memory (its sandboxes restore it running) or run
	// at each create.
	StartMode string `json:"startMode,omitempty"`
	// Steps is how many steps its last build had; Chain the parents its
	// builds start from, nearest first (["py-base", "base"] for my-env
	// built from py-base built from base).
	Steps int      `json:"steps,omitempty"`
	Chain []string `json:"chain,omitempty"`
}

// NewAPIKey is the body of POST /api-keys.
type NewAPIKey struct {
	Team string `json:"team"`
	Name string `json:"name,omitempty"`
}

// APIKey describes a key; Key holds the secret only in the answer to its
// creation.
type APIKey struct {
	ID         string     `json:"id"`
	Team       string     `json:"team"`
	Name       string     `json:"name,omitempty"`
	Prefix     string     `json:"prefix"`
	Key        string     `json:"key,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	Revoked    bool       `json:"revoked"`
}

// Health is the answer of GET /health.
type Health struct {
	// Status is "ok", "degraded" (the storage pool is at least 85 % full)
	// or "unhealthy" (at least 95 %).
	Status  string `json:"status"`
	Version string `json:"version"`
	Storage string `json:"storage"`
	Runtime string `json:"runtime"`
	// warren extensions
	Pool          *PoolUsage `json:"pool,omitempty"`
	Sandboxes     int        `json:"sandboxes"` // live (running or paused) sandboxes
	UptimeSeconds int64      `json:"uptimeSeconds"`
	// CommandsInFlight counts the commands (exec and tool calls) running
	// now in all sandboxes.
	CommandsInFlight int `json:"commandsInFlight"`
	// ErrorsTotal counts the errors the daemon hit since it started:
	// failed background operations, failed sandboxes, 5xx answers.
	ErrorsTotal uint64 `json:"errorsTotal"`
	// LastErrors are the latest of them, newest first. Only a caller with
	// an admin key sees them (they name sandboxes of every team).
	LastErrors   []HealthError `json:"lastErrors,omitempty"`
	Capabilities *Capabilities `json:"capabilities,omitempty"`
}

// HealthError is one error the daemon hit.
type HealthError struct {
	At time.Time `json:"at"`
	// Op is what failed: a daemon operation ("destroy sandbox"), an API
	// route answered with a 5xx ("POST /sandboxes/{id}/exec: 500"), or
	// "sandbox failed".
	Op        string `json:"op"`
	SandboxID string `json:"sandboxID,omitempty"`
	Message   string `json:"message"`
}

// Capabilities say which optional features this server has.
type Capabilities struct {
	// Network: sandboxes can be given a network (egress policies). When
	// false, NetworkError says why and networked creates answer 501.
	Network      bool   `json:"network"`
	NetworkError string `json:"networkError,omitempty"`
	// Runtimes are the sandbox runtimes of this server (the default first).
	Runtimes []RuntimeInfo `json:"runtimes,omitempty"`
}

// RuntimeInfo describes one sandbox runtime of a server.
type RuntimeInfo struct {
	Name    string `json:"name"`
	Default bool   `json:"default,omitempty"`
	// Available: new sandboxes can use it. When false, Error says why and
	// creates asking for it answer 501.
	Available bool   `json:"available"`
	Error     string `json:"error,omitempty"`
	// Version of the runtime's engine (runsc's, for gvisor), when known.
	Version        string `json:"version,omitempty"`
	Pause          bool   `json:"pause"`
	MemorySnapshot bool   `json:"memorySnapshot"`
	// UserNS: this runtime's sandboxes start in user namespaces of their
	// own (root inside is an unprivileged host uid; native, the default).
	// When false on a runtime that could, UserNSOff says why: turned off,
	// or what the host lacks (the daemon fell back to none).
	UserNS    bool   `json:"userns,omitempty"`
	UserNSOff string `json:"usernsOff,omitempty"`
}
