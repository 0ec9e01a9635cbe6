package credentials

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/internal/reportgate"
	"github.com/wasmccm/wasmccm/runtime/origin"
)

// Authenticator applies a module's credentials to its requests.
type Authenticator struct {
	module string
	store  *Store
	creds  map[string]*boundCredential
	// params maps each reserved header a scheme reads to its scheme.
	params map[string]string
	// signer signs for the sigv4 scheme. It caches the keys it derives by
	// access key ID, not secret: one per Authenticator keeps a module's
	// keys from serving another's.
	signer *v4.Signer
	// now is the signing clock; tests fix it.
	now func() time.Time

	onFailure func(credential string, err error)
	reported  *reportgate.Gate
}

// boundCredential is an AuthConfig ready to apply.
type boundCredential struct {
	AuthConfig
	scheme  scheme
	origins origin.Set
	// tokens caches the access token of a scheme that obtains one, shared
	// by every Authenticator of the module (sharedTokenCache); the other
	// schemes leave it empty.
	tokens *tokenCache
}

// New builds the authenticator of module's credentials cfg, whose
// secrets store serves; every bound origin must be in allowed, unless it
// is nil.
func New(module string, cfg Config, allowed origin.Set, store *Store) (*Authenticator, error) {
	if errs := validateAuth(cfg.Auth, allowed); len(errs) > 0 {
		return nil, fmt.Errorf("credentials: %w", errors.Join(errs...))
	}
	a := &Authenticator{module: module, store: store, creds: map[string]*boundCredential{}, params: schemeParams(),
		signer: v4.NewSigner(), now: time.Now, onFailure: cfg.OnAuthFailure, reported: reportgate.New(authFailureInterval)}
	for _, c := range cfg.Auth {
		origins, _ := origin.ParseSet(c.Origins)
		_, s, _ := c.scheme()
		a.creds[c.Name] = &boundCredential{AuthConfig: c, scheme: s, origins: origins, tokens: sharedTokenCache(module, &c)}
	}
	return a, nil
}

// NewTransport returns a RoundTripper that applies creds to requests
// that name a credential, as the host does, and sends them with next: for
// providers run natively (modules/sdk/native), so that they authenticate
// exactly as their modules do. It enforces the origin bindings but no
// allowlist.
func NewTransport(module string, creds Config, next http.RoundTripper) (http.RoundTripper, error) {
	store, err := NewStore(creds)
	if err != nil {
		return nil, err
	}
	a, err := New(module, creds, nil, store)
	if err != nil {
		return nil, err
	}
	return a.Transport(next), nil
}

// Transport returns next with the credentials applied to each request.
// It belongs between the client, which checks the allowlist at every
// redirect hop, and the network: each hop is authenticated by its own
// origin, so a credential never follows a redirect elsewhere.
func (a *Authenticator) Transport(next http.RoundTripper) http.RoundTripper {
	return &transport{auth: a, next: next}
}

type transport struct {
	auth *Authenticator
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	out, err := t.auth.apply(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.next.RoundTrip(out)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.auth.refused(req.Header.Get(abi.HeaderCredential), out.Header.Get("Authorization"))
	}
	return resp, err
}

// refused notes that the cloud answered 401 to a request authenticated
// with credential's authorization: an OAuth2 token is dropped (a revoked
// token would otherwise fail every call until it expired).
func (a *Authenticator) refused(credential, authorization string) {
	cred := a.creds[credential]
	if cred == nil {
		return
	}
	if token, ok := strings.CutPrefix(authorization, "Bearer "); ok {
		cred.tokens.reject(token)
	}
}

// AuthError is a credential that could not be applied: a missing or
// malformed secret, or a failed token exchange. It never carries the
// secret.
type AuthError struct {
	Credential string
	Err        error
}

func (e *AuthError) Error() string { return fmt.Sprintf("credential %q: %v", e.Credential, e.Err) }
func (e *AuthError) Unwrap() error { return e.Err }

// DeniedError is a request refused by the credentials' policy: a
// credential not granted or not bound to the destination, a reserved
// header unknown to the host. No secret was read or sent.
type DeniedError struct{ Reason string }

func (e *DeniedError) Error() string { return "denied: " + e.Reason }

func denied(format string, args ...any) error {
	return &DeniedError{Reason: fmt.Sprintf(format, args...)}
}

// apply returns req authenticated as its reserved headers ask, with those
// headers removed; req itself is not changed.
func (a *Authenticator) apply(req *http.Request) (*http.Request, error) {
	g, err := a.authorize(req.Method, req.Header, req.URL)
	if err != nil {
		return nil, err
	}
	if !g.reserved {
		return req, nil
	}
	out := req.Clone(req.Context())
	for key := range out.Header {
		if reservedHeader(key) {
			delete(out.Header, key)
		}
	}
	if g.cred == nil {
		return out, nil
	}
	if err := g.cred.scheme.apply(out, &applying{auth: a, cred: g.cred, params: g.params}); err != nil {
		err = &AuthError{Credential: g.cred.Name, Err: known.redactError(err)}
		if req.Context().Err() == nil {
			// Not when the request ran out of time: a call that ended
			// while a token exchange was still under way says nothing
			// of the credential.
			a.failed(g.cred.Name, err)
		}
		return nil, err
	}
	return out, nil
}

// grant is what a request's reserved headers ask of the host.
type grant struct {
	// reserved says the request has reserved headers, to be removed.
	reserved bool
	// cred is the credential named, nil when none is.
	cred *boundCredential
	// params holds the reserved headers for the credential's scheme.
	params map[string]string
}

// Authorize checks what the reserved headers of a method request to u
// ask against the credentials granted, without reading any secret, and
// returns a *DeniedError when it is refused: the host calls it before a
// request spends the rate budget, as Transport does at every hop.
func (a *Authenticator) Authorize(method string, h http.Header, u *url.URL) error {
	_, err := a.authorize(method, h, u)
	return err
}

func (a *Authenticator) authorize(method string, h http.Header, u *url.URL) (grant, error) {
	var g grant
	var name string
	for key, values := range h {
		if !reservedHeader(key) {
			continue
		}
		g.reserved = true
		value := strings.Join(values, ",")
		switch key = http.CanonicalHeaderKey(key); {
		case key == abi.HeaderCredential:
			name = value
		case key == abi.HeaderReadOnly:
			// Says nothing of credentials: the wasm host's coalescing
			// reads it, and a native run, which has none, removes it,
			// refusing what the host refuses.
			if value != abi.ReadOnlyValue {
				return grant{}, denied("header %s must be %q", key, abi.ReadOnlyValue)
			}
			if !ReadOnlyMethod(method) {
				return grant{}, denied("header %s is for a POST or QUERY, not %s", key, method)
			}
		case a.params[key] != "":
			if g.params == nil {
				g.params = map[string]string{}
			}
			g.params[key] = value
		default:
			return grant{}, denied("header %s is reserved for the host and unknown to it", key)
		}
	}
	if name == "" {
		if len(g.params) > 0 {
			return grant{}, denied("%s need %s", strings.Join(slices.Sorted(maps.Keys(g.params)), " and "), abi.HeaderCredential)
		}
		return g, nil
	}
	cred := a.creds[name]
	if cred == nil {
		return grant{}, denied("credential %q is not in credentials.auth", name)
	}
	o, err := origin.Of(u)
	if err != nil {
		return grant{}, denied("destination %q: %v", u.Redacted(), err)
	}
	if !cred.origins[o] {
		return grant{}, denied("credential %q is not bound to origin %s", name, o)
	}
	for param := range g.params {
		if p, ok := cred.scheme.(parameterized); !ok || !slices.Contains(p.params(), param) {
			return grant{}, denied("credential %q is not a %s credential", name, a.params[param])
		}
	}
	if h.Get("Authorization") != "" || h.Get(cred.scheme.header()) != "" {
		return grant{}, denied("a request that names credential %q may not set the header it sets", name)
	}
	g.cred = cred
	return g, nil
}

// ReadOnlyMethod reports the methods abi.HeaderReadOnly may mark: POST,
// which query APIs read with, and QUERY, a read with a body; on a read
// (GET, HEAD, or none, which is GET) it says nothing new. No API reads
// with another method, and a marked write would be coalesced: sent once
// for several identical ones.
func ReadOnlyMethod(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodPost, "QUERY":
		return true
	}
	return false
}

// authFailureInterval spaces the reports of one credential's failures.
const authFailureInterval = time.Minute

// failed logs and reports a credential's failure, at most once per
// credential per authFailureInterval: a module retrying a broken
// credential in every call must not flood the log or the Events.
func (a *Authenticator) failed(name string, err error) {
	if !a.reported.Admit(name, time.Now()) {
		return
	}
	klog.ErrorS(err, "applying a credential to a module's request", "module", a.module, "credential", name)
	if a.onFailure != nil {
		a.onFailure(name, err)
	}
}
