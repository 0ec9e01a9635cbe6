package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"golang.org/x/oauth2/clientcredentials"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
)

// AuthConfig is one credential a module's requests may name (with the
// abi.HeaderCredential header): the origins it may be sent to and the one
// scheme that applies it. Secrets are Secret keys in CredentialsConfig.Dir,
// read by the host at send time; the module never holds them.
type AuthConfig struct {
	// Name is what the module names.
	Name string `json:"name"`
	// Origins are the "scheme://host[:port]" destinations the credential
	// is applied to, each also in the allowed origins. A request, or a
	// redirect hop, to any other origin that names it is refused.
	Origins []string `json:"origins"`

	Bearer                  *BearerAuth                  `json:"bearer,omitempty"`
	Basic                   *BasicAuth                   `json:"basic,omitempty"`
	Header                  *HeaderAuth                  `json:"header,omitempty"`
	SigV4                   *SigV4Auth                   `json:"sigv4,omitempty"`
	OAuth2ClientCredentials *OAuth2ClientCredentialsAuth `json:"oauth2ClientCredentials,omitempty"`
	GoogleServiceAccount    *GoogleServiceAccountAuth    `json:"googleServiceAccount,omitempty"`
}

// BearerAuth sends "Authorization: Bearer <the value of Key>".
type BearerAuth struct {
	Key string `json:"key"`
}

// BasicAuth sends HTTP basic authentication.
type BasicAuth struct {
	UsernameKey string `json:"usernameKey"`
	PasswordKey string `json:"passwordKey"`
}

// HeaderAuth sends the value of Key in the header Name, e.g.
// X-Auth-Token.
type HeaderAuth struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// SigV4Auth signs requests with AWS Signature Version 4. Region and
// Service are defaults that a request may override with the
// abi.HeaderSigV4Region and abi.HeaderSigV4Service headers.
type SigV4Auth struct {
	AccessKeyIDKey     string `json:"accessKeyIDKey"`
	SecretAccessKeyKey string `json:"secretAccessKeyKey"`
	// SessionTokenKey, when set, holds a session token of temporary
	// credentials.
	SessionTokenKey string `json:"sessionTokenKey,omitempty"`
	Region          string `json:"region,omitempty"`
	Service         string `json:"service,omitempty"`
}

// OAuth2ClientCredentialsAuth sends a bearer token the host obtains from
// TokenURL with the OAuth2 client credentials grant (Azure, Keycloak and
// most OAuth2 servers).
type OAuth2ClientCredentialsAuth struct {
	TokenURL        string   `json:"tokenURL"`
	ClientIDKey     string   `json:"clientIDKey"`
	ClientSecretKey string   `json:"clientSecretKey"`
	Scopes          []string `json:"scopes,omitempty"`
}

// GoogleServiceAccountAuth sends a bearer token the host obtains by
// exchanging a JWT signed with a Google service account key.
type GoogleServiceAccountAuth struct {
	// Key holds the service account's JSON key file.
	Key    string   `json:"key"`
	Scopes []string `json:"scopes"`
	// TokenURL overrides the key file's token_uri.
	TokenURL string `json:"tokenURL,omitempty"`
}

// scheme names the one scheme set, or "" when none or several are.
func (a *AuthConfig) scheme() (string, int) {
	var name string
	n := 0
	for _, s := range []struct {
		name string
		set  bool
	}{
		{"bearer", a.Bearer != nil}, {"basic", a.Basic != nil}, {"header", a.Header != nil}, {"sigv4", a.SigV4 != nil},
		{"oauth2ClientCredentials", a.OAuth2ClientCredentials != nil}, {"googleServiceAccount", a.GoogleServiceAccount != nil},
	} {
		if s.set {
			name, n = s.name, n+1
		}
	}
	return name, n
}

// keys are the Secret keys the credential reads.
func (a *AuthConfig) keys() []string {
	switch {
	case a.Bearer != nil:
		return []string{a.Bearer.Key}
	case a.Basic != nil:
		return []string{a.Basic.UsernameKey, a.Basic.PasswordKey}
	case a.Header != nil:
		return []string{a.Header.Key}
	case a.SigV4 != nil:
		keys := []string{a.SigV4.AccessKeyIDKey, a.SigV4.SecretAccessKeyKey}
		if a.SigV4.SessionTokenKey != "" {
			keys = append(keys, a.SigV4.SessionTokenKey)
		}
		return keys
	case a.OAuth2ClientCredentials != nil:
		return []string{a.OAuth2ClientCredentials.ClientIDKey, a.OAuth2ClientCredentials.ClientSecretKey}
	case a.GoogleServiceAccount != nil:
		return []string{a.GoogleServiceAccount.Key}
	}
	return nil
}

// ValidateCredentials checks a credentials configuration against the
// module's allowed origins, naming every problem.
func ValidateCredentials(c CredentialsConfig, allowedOrigins []string) error {
	allowed, err := ParseAllowedOrigins(allowedOrigins)
	if err != nil {
		return err
	}
	errs := validateAuth(c.Auth, allowed)
	for _, name := range c.Readable {
		if err := ValidCredentialName(name); err != nil {
			errs = append(errs, fmt.Errorf("readable: %w", err))
		}
	}
	if (len(c.Auth) > 0 || len(c.Readable) > 0) && c.Dir == "" {
		errs = append(errs, errors.New("credentials.auth and credentials.readable need credentials.dir"))
	}
	return errors.Join(errs...)
}

// validateAuth checks each entry; allowed, when not nil, must hold every
// bound origin.
func validateAuth(auth []AuthConfig, allowed allowlist) []error {
	var errs []error
	seen := map[string]bool{}
	for i := range auth {
		a := &auth[i]
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("auth[%d] (%s): %s", i, a.Name, fmt.Sprintf(format, args...)))
		}
		if err := validHeaderValue(a.Name); err != nil || ValidCredentialName(a.Name) != nil {
			fail("name %q is not a plain name", a.Name)
		}
		if seen[a.Name] {
			fail("name %q is listed twice", a.Name)
		}
		seen[a.Name] = true
		if len(a.Origins) == 0 {
			fail("no origins: a credential is applied only to the origins bound to it")
		}
		origins, err := ParseAllowedOrigins(a.Origins)
		if err != nil {
			fail("%v", err)
		}
		for o := range origins {
			if allowed != nil && !allowed[o] {
				fail("origin %s is not in http.allowedOrigins", o)
			}
		}
		scheme, n := a.scheme()
		if n != 1 {
			fail("set exactly one of bearer, basic, header, sigv4, oauth2ClientCredentials, googleServiceAccount (%d set)", n)
			continue
		}
		for _, key := range a.keys() {
			if err := ValidCredentialName(key); err != nil {
				fail("%s: %v", scheme, err)
			}
		}
		switch {
		case a.Header != nil:
			if !validHeaderName(a.Header.Name) || strings.HasPrefix(http.CanonicalHeaderKey(a.Header.Name), abi.HeaderPrefix) ||
				http.CanonicalHeaderKey(a.Header.Name) == "Host" {
				fail("header: name %q is not a header a credential can be sent in", a.Header.Name)
			}
		case a.OAuth2ClientCredentials != nil:
			if err := validTokenURL(a.OAuth2ClientCredentials.TokenURL, true); err != nil {
				fail("oauth2ClientCredentials: %v", err)
			}
		case a.GoogleServiceAccount != nil:
			if len(a.GoogleServiceAccount.Scopes) == 0 {
				fail("googleServiceAccount: scopes are required")
			}
			if err := validTokenURL(a.GoogleServiceAccount.TokenURL, false); err != nil {
				fail("googleServiceAccount: %v", err)
			}
		}
	}
	return errs
}

func validTokenURL(s string, required bool) error {
	if s == "" && !required {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("tokenURL %q is not an http(s) URL", s)
	}
	return nil
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validHeaderValue refuses what would split or corrupt a header.
func validHeaderValue(v string) error {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return errors.New("contains a control character")
		}
	}
	return nil
}

// authenticator applies the module's credentials to its requests.
type authenticator struct {
	module string
	store  *credentialStore
	creds  map[string]*boundCredential
	signer *v4.Signer
	// now is the signing clock; tests fix it.
	now func() time.Time

	onFailure func(credential string, err error)
	mu        sync.Mutex
	reported  map[string]time.Time

	// sent is what the credentials sent, looked for in every response.
	sent *sentSecrets
}

// boundCredential is an AuthConfig ready to apply.
type boundCredential struct {
	AuthConfig
	origins allowlist
	// tokens caches the OAuth2 token of the two token schemes.
	tokens *tokenCache

	// client is the client credentials configuration for the current
	// client ID and secret, kept so that the OAuth2 library remembers how
	// the token endpoint wants them sent.
	mu     sync.Mutex
	client *clientcredentials.Config
}

// newAuthenticator builds the module's authenticator; origins are checked
// against allowed when it is not nil.
func newAuthenticator(module string, cfg CredentialsConfig, allowed allowlist, store *credentialStore) (*authenticator, error) {
	if errs := validateAuth(cfg.Auth, allowed); len(errs) > 0 {
		return nil, fmt.Errorf("credentials: %w", errors.Join(errs...))
	}
	a := &authenticator{module: module, store: store, creds: map[string]*boundCredential{}, signer: v4.NewSigner(),
		now: time.Now, onFailure: cfg.OnAuthFailure, reported: map[string]time.Time{}, sent: newSentSecrets(module)}
	for _, c := range cfg.Auth {
		origins, _ := ParseAllowedOrigins(c.Origins)
		b := &boundCredential{AuthConfig: c, origins: origins}
		if c.OAuth2ClientCredentials != nil || c.GoogleServiceAccount != nil {
			b.tokens = sharedTokenCache(module, &c)
		}
		a.creds[c.Name] = b
	}
	return a, nil
}

// newModuleAuthenticator is the authenticator of a module run by the host:
// every bound origin must be allowed.
func newModuleAuthenticator(cfg Config, store *credentialStore) (*authenticator, error) {
	allowed, err := ParseAllowedOrigins(cfg.HTTP.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	return newAuthenticator(cfg.Name, cfg.Credentials, allowed, store)
}

// NewAuthTransport returns a RoundTripper that applies creds to requests
// that name a credential, as the host does, and sends them with next: for
// providers run natively (modules/sdk/native), so that they authenticate
// exactly as their modules do. It enforces the origin bindings but no
// allowlist.
func NewAuthTransport(module string, creds CredentialsConfig, next http.RoundTripper) (http.RoundTripper, error) {
	store, err := newCredentialStore(module, creds)
	if err != nil {
		return nil, err
	}
	a, err := newAuthenticator(module, creds, nil, store)
	if err != nil {
		return nil, err
	}
	return &authTransport{auth: a, next: next}, nil
}

// authTransport sits between the client, which checks the allowlist at
// every redirect hop, and the network: each hop is authenticated by its
// own origin, so a credential never follows a redirect elsewhere.
type authTransport struct {
	auth *authenticator
	next http.RoundTripper
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
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
func (a *authenticator) refused(credential, authorization string) {
	cred := a.creds[credential]
	if cred == nil || cred.tokens == nil {
		return
	}
	if token, ok := strings.CutPrefix(authorization, "Bearer "); ok {
		cred.tokens.reject(token)
	}
}

// redact overwrites in resp the secrets the module's credentials sent,
// which a server may have echoed; a module without credentials sends none.
func (a *authenticator) redact(resp *abi.HTTPResponse) {
	if a != nil && len(a.creds) > 0 {
		a.sent.redact(resp)
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

// apply returns req authenticated as its reserved headers ask, with those
// headers removed; req itself is not changed.
func (a *authenticator) apply(req *http.Request) (*http.Request, error) {
	g, err := a.authorize(req.Header, req.URL)
	if err != nil {
		return nil, err
	}
	if !g.reserved {
		return req, nil
	}
	out := req.Clone(req.Context())
	for key := range out.Header {
		if hasReservedPrefix(key) {
			delete(out.Header, key)
		}
	}
	if g.cred == nil {
		return out, nil
	}
	if err := a.authenticate(out, g.cred, g.service, g.region); err != nil {
		err = &AuthError{Credential: g.cred.Name, Err: a.sent.redactError(err)}
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
	cred            *boundCredential
	service, region string
}

// authorize checks what the reserved headers of a request to u ask against
// the credentials granted, without reading any secret: the host calls it
// before a request spends the rate budget, and apply at every hop.
func (a *authenticator) authorize(h http.Header, u *url.URL) (grant, error) {
	var g grant
	var name string
	for key, values := range h {
		if !hasReservedPrefix(key) {
			continue
		}
		g.reserved = true
		value := strings.Join(values, ",")
		switch http.CanonicalHeaderKey(key) {
		case abi.HeaderCredential:
			name = value
		case abi.HeaderSigV4Service:
			g.service = value
		case abi.HeaderSigV4Region:
			g.region = value
		default:
			return grant{}, &deniedError{fmt.Sprintf("header %s is reserved for the host and unknown to it", key)}
		}
	}
	if name == "" {
		if g.service != "" || g.region != "" {
			return grant{}, &deniedError{fmt.Sprintf("%s and %s need %s", abi.HeaderSigV4Service, abi.HeaderSigV4Region, abi.HeaderCredential)}
		}
		return g, nil
	}
	cred := a.creds[name]
	if cred == nil {
		return grant{}, &deniedError{fmt.Sprintf("credential %q is not in credentials.auth", name)}
	}
	o, err := parseOrigin(u)
	if err != nil {
		return grant{}, &deniedError{fmt.Sprintf("destination %q: %v", u.Redacted(), err)}
	}
	if !cred.origins[o] {
		return grant{}, &deniedError{fmt.Sprintf("credential %q is not bound to origin %s", name, o)}
	}
	if cred.SigV4 == nil && (g.service != "" || g.region != "") {
		return grant{}, &deniedError{fmt.Sprintf("credential %q is not a sigv4 credential", name)}
	}
	if h.Get("Authorization") != "" || cred.Header != nil && h.Get(cred.Header.Name) != "" {
		return grant{}, &deniedError{fmt.Sprintf("a request that names credential %q may not set the header it sets", name)}
	}
	g.cred = cred
	return g, nil
}

func hasReservedPrefix(header string) bool {
	return len(header) >= len(abi.HeaderPrefix) && strings.EqualFold(header[:len(abi.HeaderPrefix)], abi.HeaderPrefix)
}

// authenticate applies cred's scheme to req, recording the secrets it
// sends so that they are looked for in the responses.
func (a *authenticator) authenticate(req *http.Request, cred *boundCredential, service, region string) error {
	sent := secretSlot{cred.Name, "request"}
	switch {
	case cred.Bearer != nil:
		token, err := a.secret(cred.Bearer.Key)
		if err != nil {
			return err
		}
		a.setBearer(req, sent, token)
	case cred.Basic != nil:
		user, err := a.secret(cred.Basic.UsernameKey)
		if err != nil {
			return err
		}
		password, err := a.secret(cred.Basic.PasswordKey)
		if err != nil {
			return err
		}
		req.SetBasicAuth(user, password)
		a.sent.record(sent, password, user+":"+password, req.Header.Get("Authorization"))
	case cred.Header != nil:
		value, err := a.secret(cred.Header.Key)
		if err != nil {
			return err
		}
		a.sent.record(sent, value)
		req.Header.Set(cred.Header.Name, value)
	case cred.SigV4 != nil:
		return a.signV4(req, sent, cred.SigV4, service, region)
	default:
		token, err := a.token(req.Context(), cred)
		if err != nil {
			return err
		}
		a.setBearer(req, sent, token)
	}
	return nil
}

// setBearer sends token as a bearer token. "Bearer <token>" is recorded
// too, for a token too short to be looked for alone.
func (a *authenticator) setBearer(req *http.Request, sent secretSlot, token string) {
	authorization := "Bearer " + token
	a.sent.record(sent, token, authorization)
	req.Header.Set("Authorization", authorization)
}

// secret reads a Secret key for the host's own use, trimmed of the
// surrounding white space files tend to end with.
func (a *authenticator) secret(key string) (string, error) {
	b, err := a.readKey(key)
	if err != nil {
		return "", err
	}
	v := string(bytes.TrimSpace(b))
	if v == "" {
		return "", fmt.Errorf("key %q is empty", key)
	}
	if err := validHeaderValue(v); err != nil {
		return "", fmt.Errorf("key %q %v", key, err)
	}
	return v, nil
}

// readKey reads a Secret key through the rotation-aware cache.
func (a *authenticator) readKey(key string) ([]byte, error) {
	b, err := a.store.read(key)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("key %q is not in the credentials directory", key)
	case err != nil:
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err
		}
		return nil, fmt.Errorf("reading key %q: %w", key, err)
	}
	return b, nil
}

// emptyPayloadHash is the SHA-256 of no bytes, SigV4's hash of a request
// without a body.
const emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func (a *authenticator) signV4(req *http.Request, sent secretSlot, cfg *SigV4Auth, service, region string) error {
	if service == "" {
		service = cfg.Service
	}
	if region == "" {
		region = cfg.Region
	}
	if service == "" || region == "" {
		return fmt.Errorf("sigv4 needs a service and a region: set sigv4.service and sigv4.region, or send %s and %s",
			abi.HeaderSigV4Service, abi.HeaderSigV4Region)
	}
	var creds aws.Credentials
	var err error
	if creds.AccessKeyID, err = a.secret(cfg.AccessKeyIDKey); err != nil {
		return err
	}
	if creds.SecretAccessKey, err = a.secret(cfg.SecretAccessKeyKey); err != nil {
		return err
	}
	if cfg.SessionTokenKey != "" {
		if creds.SessionToken, err = a.secret(cfg.SessionTokenKey); err != nil {
			return err
		}
	}
	// The secret access key never leaves the host, only signatures made
	// with it; the session token is sent as it is.
	if creds.SessionToken != "" {
		a.sent.record(sent, creds.SessionToken)
	}
	hash := emptyPayloadHash
	if req.GetBody != nil && req.ContentLength != 0 {
		// Every hop signs its own copy of the body.
		body, err := req.GetBody()
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, body)
		body.Close()
		if err != nil {
			return err
		}
		hash = hex.EncodeToString(h.Sum(nil))
	}
	return a.signer.SignHTTP(req.Context(), creds, req, hash, service, region, a.now())
}

// authFailureInterval spaces the reports of one credential's failures.
const authFailureInterval = time.Minute

// failed logs and reports a credential's failure, at most once per
// credential per authFailureInterval: a module retrying a broken
// credential in every call must not flood the log or the Events.
func (a *authenticator) failed(name string, err error) {
	a.mu.Lock()
	last, ok := a.reported[name]
	now := time.Now()
	report := !ok || now.Sub(last) >= authFailureInterval
	if report {
		a.reported[name] = now
	}
	a.mu.Unlock()
	if !report {
		return
	}
	klog.ErrorS(err, "applying a credential to a module's request", "module", a.module, "credential", name)
	if a.onFailure != nil {
		a.onFailure(name, err)
	}
}

// SecretKeys lists, once each, the Secret keys the configuration reads:
// the secrets tools look for where they must not appear.
func (c CredentialsConfig) SecretKeys() []string {
	var keys []string
	seen := map[string]bool{}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for i := range c.Auth {
		for _, k := range c.Auth[i].keys() {
			add(k)
		}
	}
	for _, k := range c.Readable {
		add(k)
	}
	return keys
}
