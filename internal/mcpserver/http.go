package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/client"
)

// MaxMessageBytes bounds one MCP message from a client (an HTTP body, a
// stdio line): a little over the API's cap on a tool call's body (32 MiB),
// so that a large write fails with the API's message rather than the
// transport's.
const MaxMessageBytes = 40 << 20

// defaultSessionTimeout closes an MCP session that has seen no request for
// this long, so that abandoned sessions do not pile up in the daemon.
const defaultSessionTimeout = 30 * time.Minute

// HTTPOptions configure HTTPHandler.
type HTTPOptions struct {
	// Version is the server version reported to clients.
	Version string
	// Logger receives the handler's log (nil: discarded).
	Logger *slog.Logger
	// HTTPClient carries the calls to the daemon's API (nil: the default).
	HTTPClient *http.Client
	// SessionTimeout closes idle sessions (0: 30 minutes).
	SessionTimeout time.Duration
}

// HTTPHandler serves MCP over Streamable HTTP. Each session gets its own
// server over a client of the warren API at baseURL (the daemon's own
// address) that authenticates with the caller's API key, so a caller can do
// through MCP exactly what its key allows through the REST API.
//
// The key comes from X-API-Key or "Authorization: Bearer <key>"; a request
// without one is answered 401 before any MCP handling. A session is bound to
// the key that opened it: a request for it with another key is refused.
// The key itself is checked by the API on each call; put the handler behind
// the API's own authentication to refuse bad keys up front too.
func HTTPHandler(baseURL string, o HTTPOptions) http.Handler {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	timeout := o.SessionTimeout
	if timeout == 0 {
		timeout = defaultSessionTimeout
	}
	var copts []client.Option
	if o.HTTPClient != nil {
		copts = append(copts, client.WithHTTPClient(o.HTTPClient))
	}
	cat := &catalog{} // the tool list is the same for every caller
	streamable := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		c := client.New(baseURL, APIKey(r), copts...)
		return New(c, o.Version, WithLogger(log), withCatalog(cat))
	}, &mcp.StreamableHTTPOptions{
		Logger: log, SessionTimeout: timeout, MaxRequestBodyBytes: MaxMessageBytes,
	})

	// The SDK refuses a request for a session opened under another user
	// when the request carries token info; its bearer middleware is how
	// that info gets there, so the key is presented to it as a bearer token
	// and the user is the key's digest.
	bound := auth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		sum := sha256.Sum256([]byte(token))
		return &auth.TokenInfo{UserID: hex.EncodeToString(sum[:])}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := APIKey(r)
		if key == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="warren"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(client.Error{Code: http.StatusUnauthorized,
				Message: "missing API key: send it in the X-API-Key header or as Authorization: Bearer <key>"})
			return
		}
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+key)
		bound.ServeHTTP(w, r)
	})
}

// APIKey is the request's API key: X-API-Key, or a Bearer Authorization
// (what MCP clients commonly send).
func APIKey(r *http.Request) string {
	if key := strings.TrimSpace(r.Header.Get("X-API-Key")); key != "" {
		return key
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(token)
	}
	return ""
}

// LoopbackURL is the base URL at which the daemon reaches its own API when
// it listens on addr: an unspecified address (0.0.0.0, ::) is reached
// through loopback.
func LoopbackURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
