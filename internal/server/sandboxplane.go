package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/accesstoken"
	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// EnvdVersion is the version of E2B's envd protocol the agent implements.
// The SDKs gate features on it (0.5.2 closing stdin, 0.5.7 octet-stream
// uploads, 0.6.2 file metadata, 0.6.3 entries in watch events, 0.6.4
// watching network mounts): advertise only what is really served.
const EnvdVersion = "0.6.4"

// The sandbox plane is E2B's envd API: every request names its sandbox with
// the E2b-Sandbox-Id and E2b-Sandbox-Port headers (or a Host of the form
// <port>-<id>.<domain>) and proves itself with the sandbox's access token
// (X-Access-Token), the owner's API key, or a signed file URL. Port 49983
// is envd, served by the sandbox's agent; any other port is a server the
// sandbox runs (ports.go).

// sandboxTargetOf reads E2B's routing from a request; ok is false for
// requests meant for the control-plane API.
func sandboxTargetOf(r *http.Request) (portTarget, bool) {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		port := envdPort
		if p := r.Header.Get("E2b-Sandbox-Port"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil {
				port = -1 // refused by validPort with a clear message
			} else {
				port = n
			}
		}
		return portTarget{id: id, port: port}, true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, rest, ok := strings.Cut(host, ".")
	if !ok || rest == "" {
		return portTarget{}, false
	}
	p, id, ok := strings.Cut(label, "-")
	if !ok || id == "" || p == "" || strings.Trim(p, "0123456789") != "" {
		return portTarget{}, false
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return portTarget{}, false
	}
	return portTarget{id: strings.ToLower(id), port: port}, true
}

// isEnvdPath reports whether a request without sandbox headers was meant
// for the sandbox plane: it gets a clear error instead of "no route".
func isEnvdPath(path string) bool {
	return path == "/files" || strings.HasPrefix(path, "/process.Process/") || strings.HasPrefix(path, "/filesystem.Filesystem/")
}

// servePlane serves a request routed to a sandbox: envd's port to the
// agent, any other to a server inside the sandbox.
func (s *Server) servePlane(w http.ResponseWriter, r *http.Request, t portTarget) {
	if err := validPort(t.port); err != nil {
		planeError(w, r, err)
		return
	}
	if t.port != envdPort {
		s.ports.servePort(w, r, t)
		return
	}
	s.envd.serveEnvd(w, r, t.id)
}

// envdRoutes serve E2B's envd API of the sandbox plane: they check the
// caller and carry the request to the sandbox's agent.
type envdRoutes struct {
	plane     Plane
	tokens    *accesstoken.Issuer
	authz     *authCache
	log       *slog.Logger
	maxUpload int64

	// The agent's HTTP/2 link is the transport; the request keeps its
	// path, query and body.
	proxyOnce sync.Once
	proxy     *httputil.ReverseProxy
}

// serveEnvd serves a request for sandbox id's envd.
func (s *envdRoutes) serveEnvd(w http.ResponseWriter, r *http.Request, id string) {
	rec, err := s.plane.Lookup(r.Context(), id)
	if err != nil {
		sandboxGone(w, r, id, err)
		return
	}
	if err := s.envdAllowed(r, rec); err != nil {
		planeError(w, r, err)
		return
	}
	s.proxyEnvd(w, r, rec)
}

// envdAllowed checks a sandbox-plane caller: the sandbox's own access token,
// an API key of its team, or (for /files) a URL signed with the token.
func (s *envdRoutes) envdAllowed(r *http.Request, rec store.Sandbox) error {
	token := s.tokens.EnvdToken(rec.ID)
	if presented := r.Header.Get("X-Access-Token"); presented != "" {
		if accesstoken.Equal(presented, token) {
			return nil
		}
		return fmt.Errorf("X-Access-Token is not this sandbox's access token: %w", errdefs.ErrUnauthenticated)
	}
	if s.authz.keyTeam(r) == rec.Team {
		return nil
	}
	if r.URL.Path == "/files" && r.URL.Query().Get("signature") != "" {
		return s.verifySigned(r, token)
	}
	return fmt.Errorf("sandbox %s needs its access token: send the envdAccessToken from create or connect in X-Access-Token: %w", rec.ID, errdefs.ErrUnauthenticated)
}

// signedOf reads a signed file URL's parameters.
func signedOf(r *http.Request) accesstoken.Signed {
	q := r.URL.Query()
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	return accesstoken.Signed{
		Path:       q.Get("path"),
		Operation:  op,
		User:       q.Get("username"),
		Signature:  q.Get("signature"),
		Expiration: q.Get("signature_expiration"),
	}
}

func (s *envdRoutes) verifySigned(r *http.Request, token string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return fmt.Errorf("signed URLs are for GET and POST /files: %w", errdefs.ErrInvalid)
	}
	return signedErr(accesstoken.Verify(signedOf(r), token, time.Now()))
}

// signedErr is what a signed URL that failed to verify answers: E2B's
// envd's words, 401 (accesstoken's errors), whatever the detail.
func signedErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, accesstoken.ErrExpired):
		return accesstoken.ErrExpired
	default:
		return accesstoken.ErrBadSignature
	}
}

// serveSigned serves a signed file URL that arrived without sandbox headers
// (E2B_SANDBOX_URL points every sandbox at the same address): the sandbox
// is the one whose token verifies the signature.
func (s *envdRoutes) serveSigned(w http.ResponseWriter, r *http.Request) {
	sig := signedOf(r)
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		planeError(w, r, fmt.Errorf("signed URLs are for GET and POST /files: %w", errdefs.ErrInvalid))
		return
	}
	for _, id := range s.plane.Attached() {
		if err := accesstoken.Verify(sig, s.tokens.EnvdToken(id), time.Now()); err != nil {
			if errors.Is(err, accesstoken.ErrExpired) {
				planeError(w, r, accesstoken.ErrExpired)
				return
			}
			continue
		}
		rec, err := s.plane.Lookup(r.Context(), id)
		if err != nil {
			sandboxGone(w, r, id, err)
			return
		}
		s.proxyEnvd(w, r, rec)
		return
	}
	// It matches no running sandbox's file, operation and user.
	planeError(w, r, accesstoken.ErrBadSignature)
}

// signedOwner answers GET /signed-urls/owner: which running sandbox a
// signed file URL (its query, with operation=read or write) belongs to, so
// a fleet's gateway can route a URL that names no sandbox to the node
// holding it. It needs no key, as the URL itself does not: it tells only
// the holder of a valid signature the id of the sandbox it opens.
func (s *envdRoutes) signedOwner(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sig := accesstoken.Signed{Path: q.Get("path"), Operation: q.Get("operation"), User: q.Get("username"),
		Signature: q.Get("signature"), Expiration: q.Get("signature_expiration")}
	if sig.Operation != "read" && sig.Operation != "write" {
		writeError(w, r, fmt.Errorf("operation must be read (a download URL) or write (an upload URL): %w", errdefs.ErrInvalid))
		return
	}
	for _, id := range s.plane.Attached() {
		err := accesstoken.Verify(sig, s.tokens.EnvdToken(id), time.Now())
		if errors.Is(err, accesstoken.ErrExpired) {
			writeError(w, r, accesstoken.ErrExpired)
			return
		}
		if err == nil {
			writeJSON(w, http.StatusOK, map[string]string{"sandboxID": id})
			return
		}
	}
	writeError(w, r, fmt.Errorf("the signature matches no running sandbox's file, operation and user here: %w", errdefs.ErrNotFound))
}

type envdTargetKey struct{}

type envdTarget struct {
	agent *agentconn.Conn
	id    string
	// down, when set, meters the agent's answer into meter (envdactivity.go).
	down  metering
	meter noter
}

// envdTransport sends each request over its sandbox's agent link.
type envdTransport struct{}

func (envdTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t, ok := req.Context().Value(envdTargetKey{}).(envdTarget)
	if !ok {
		return nil, errors.New("envd proxy: request without a sandbox")
	}
	resp, err := t.agent.Transport().RoundTrip(req)
	if err == nil && t.down != nil {
		resp.Body = t.down(resp.Body, t.meter)
	}
	return resp, err
}

func (s *envdRoutes) envdReverseProxy() *httputil.ReverseProxy {
	s.proxyOnce.Do(func() {
		s.proxy = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Scheme = "http"
				pr.Out.URL.Host = "agent"
				pr.Out.Host = "agent"
				// Credentials are the daemon's business; the sandbox's code
				// never sees them.
				for _, h := range []string{"X-Access-Token", "X-API-Key", "E2b-Sandbox-Id", "E2b-Sandbox-Port", "E2b-Traffic-Access-Token", "Cookie"} {
					pr.Out.Header.Del(h)
				}
			},
			Transport:      envdTransport{},
			FlushInterval:  -1, // Connect server streams pass each message at once
			ErrorHandler:   s.envdProxyError,
			ModifyResponse: dropChallenges,
		}
	})
	return s.proxy
}

// dropChallenges strips authentication challenges from the agent's
// answers: the agent is untrusted and must not ask the caller for other
// credentials. Its status codes pass as envd's protocol has them.
func dropChallenges(res *http.Response) error {
	res.Header.Del("WWW-Authenticate")
	res.Header.Del("Proxy-Authenticate")
	return nil
}

// proxyEnvd hands a checked request to the sandbox's agent.
func (s *envdRoutes) proxyEnvd(w http.ResponseWriter, r *http.Request, rec store.Sandbox) {
	if r.URL.Path == "/files" && r.Method == http.MethodPost {
		if r.ContentLength > s.maxUpload {
			planeError(w, r, errUploadTooLarge(s.maxUpload))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.maxUpload)
	}
	agent, err := s.plane.Agent(r.Context(), rec.Team, rec.ID)
	if err != nil {
		switch {
		case errdefs.IsNotFound(err):
			sandboxGone(w, r, rec.ID, err)
		case errdefs.IsConflict(err):
			// Paused (without autoResume) or stopped: E2B's proxy answers
			// 502, which the SDKs read as "not running" (isRunning false).
			planeError(w, r, fmt.Errorf("%s: %w", messageOf(err), errdefs.ErrUnavailable))
		default:
			planeError(w, r, err)
		}
		return
	}
	target := envdTarget{agent: agent, id: rec.ID}
	// A long stream keeps the sandbox from going idle while it carries
	// something (envdactivity.go); the request itself touched it already.
	if how := envdMeteringOf(r.URL.Path); how.up != nil || how.down != nil {
		if meter := s.plane.ActivityMeter(rec.ID); meter != nil {
			if how.up != nil && r.Body != nil && r.Body != http.NoBody {
				r.Body = how.up(r.Body, meter)
			}
			target.down, target.meter = how.down, meter
		}
	}
	ctx := context.WithValue(r.Context(), envdTargetKey{}, target)
	s.envdReverseProxy().ServeHTTP(&streamEndWriter{ResponseWriter: w}, r.WithContext(ctx))
}

// envdProxyError answers a request the agent link could not carry.
func (s *envdRoutes) envdProxyError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the caller left
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		planeError(w, r, errUploadTooLarge(tooBig.Limit))
		return
	}
	t, _ := r.Context().Value(envdTargetKey{}).(envdTarget)
	var ce *connect.Error
	if errors.As(err, &ce) {
		err = errors.New(ce.Message())
	}
	s.log.Debug("envd proxy", "sandbox", t.id, "path", r.URL.Path, "err", err)
	planeError(w, r, fmt.Errorf("sandbox %s: its agent did not answer: %v: %w", t.id, err, errdefs.ErrUnavailable))
}

// sandboxGone answers for a sandbox that does not exist (any more): E2B's
// proxy says 502 "The sandbox was not found", which the SDKs turn into their
// "sandbox was killed or timed out" error.
func sandboxGone(w http.ResponseWriter, r *http.Request, id string, err error) {
	if !errdefs.IsNotFound(err) {
		planeError(w, r, err)
		return
	}
	if isConnectRequest(r) {
		writeConnectError(w, r, connect.NewError(connect.CodeUnavailable, fmt.Errorf("sandbox %s not found: it was killed or timed out", id)))
		return
	}
	// As E2B's proxy answers, word for word: its SDK shows the message.
	writeJSON(w, http.StatusBadGateway, client.SandboxGone(id))
}

// planeError answers a sandbox-plane request: as a Connect error for RPCs,
// so the SDKs map the code, else as warren's JSON error.
func planeError(w http.ResponseWriter, r *http.Request, err error) {
	if isConnectRequest(r) {
		writeConnectError(w, r, connect.NewError(connectCodeOf(err), errors.New(messageOf(err))))
		return
	}
	writeError(w, r, err)
}

func isConnectRequest(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/")
}

var connectErrors = connect.NewErrorWriter()

func writeConnectError(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	if !connectErrors.IsSupported(r) {
		status := statusOf(err)
		writeJSON(w, status, client.Error{Code: status, Message: err.Message()})
		return
	}
	_ = connectErrors.Write(w, r, err)
}

// connectCodeOf maps an error kind to a Connect code, for the sandbox
// plane's RPCs.
func connectCodeOf(err error) connect.Code {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce.Code()
	case errors.Is(err, errTooLarge):
		return connect.CodeResourceExhausted
	case errdefs.IsNotFound(err):
		return connect.CodeNotFound
	case errdefs.IsAlreadyExists(err):
		return connect.CodeAlreadyExists
	case errdefs.IsConflict(err):
		return connect.CodeFailedPrecondition
	case errdefs.IsInvalid(err):
		return connect.CodeInvalidArgument
	case errors.Is(err, errdefs.ErrUnauthenticated):
		return connect.CodeUnauthenticated
	case errors.Is(err, errdefs.ErrPermissionDenied):
		return connect.CodePermissionDenied
	case errdefs.IsResourceExhausted(err):
		return connect.CodeResourceExhausted
	case errdefs.IsUnsupported(err):
		return connect.CodeUnimplemented
	case errdefs.IsUnavailable(err):
		return connect.CodeUnavailable
	}
	return connect.CodeInternal
}
