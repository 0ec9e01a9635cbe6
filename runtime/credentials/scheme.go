package credentials

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"time"

	"golang.org/x/oauth2"
	"k8s.io/klog/v2"
)

// scheme is one way of applying a credential to a request: the type of
// one field of AuthConfig. Adding a scheme is adding such a type, its
// field in AuthConfig and its line in schemes; nothing outside this
// package changes.
type scheme interface {
	// keys lists the Secret keys the scheme reads.
	keys() []string
	// secretKeys lists those of its keys that hold secrets, not
	// identifiers (a user name, a client or access key ID), which an
	// answer may quote for good reasons.
	secretKeys() []string
	// validate names what is wrong with the scheme's settings, its keys
	// aside (Validate checks those).
	validate() []error
	// header is the header the scheme sets, which a request that names
	// the credential may not set itself.
	header() string
	// apply authenticates req, reading the secrets through a at every
	// request, so that a rotated Secret takes effect at once, and
	// recording with a.sent what it sends, before sending it: the Secret
	// keys are known from the store, but what is made of them ("Bearer
	// <token>", "<user>:<password>") only from what is sent.
	apply(req *http.Request, a *applying) error
}

// parameterized is a scheme that a request may adjust with reserved
// headers, such as sigv4's service and region.
type parameterized interface {
	// params lists the reserved headers the scheme reads, canonical.
	params() []string
}

// schemes registers every scheme under its name in the configuration,
// in the order the error for a credential without exactly one lists them.
var schemes = []registered{
	register("bearer", func(a *AuthConfig) *BearerAuth { return a.Bearer }),
	register("basic", func(a *AuthConfig) *BasicAuth { return a.Basic }),
	register("header", func(a *AuthConfig) *HeaderAuth { return a.Header }),
	register("sigv4", func(a *AuthConfig) *SigV4Auth { return a.SigV4 }),
	register("oauth2ClientCredentials", func(a *AuthConfig) *OAuth2ClientCredentialsAuth { return a.OAuth2ClientCredentials }),
	register("googleServiceAccount", func(a *AuthConfig) *GoogleServiceAccountAuth { return a.GoogleServiceAccount }),
}

// registered is a scheme's entry in schemes.
type registered struct {
	name string
	// of returns the scheme an AuthConfig sets, nil when it sets another.
	of func(*AuthConfig) scheme
	// zero is the scheme's zero value, which tells its parameters.
	zero scheme
}

// register makes the entry of the scheme that field of AuthConfig sets.
func register[T any, P interface {
	*T
	scheme
}](name string, field func(*AuthConfig) P) registered {
	of := func(a *AuthConfig) scheme {
		// A nil pointer in an interface is not a nil interface.
		if p := field(a); p != nil {
			return p
		}
		return nil
	}
	return registered{name: name, of: of, zero: P(new(T))}
}

func schemeNames() []string {
	names := make([]string, len(schemes))
	for i, s := range schemes {
		names[i] = s.name
	}
	return names
}

// scheme returns the first scheme set, with its name, and how many are
// set: a valid credential sets exactly one.
func (a *AuthConfig) scheme() (name string, s scheme, n int) {
	for _, r := range schemes {
		if set := r.of(a); set != nil {
			if n == 0 {
				name, s = r.name, set
			}
			n++
		}
	}
	return name, s, n
}

// schemeParams maps each reserved header a scheme reads to the name of
// that scheme.
func schemeParams() map[string]string {
	params := map[string]string{}
	for _, r := range schemes {
		if p, ok := r.zero.(parameterized); ok {
			for _, h := range p.params() {
				params[h] = r.name
			}
		}
	}
	return params
}

// applying is what a scheme applies its credential to one request with.
type applying struct {
	auth *Authenticator
	cred *boundCredential
	// params holds the values of the reserved headers the scheme reads.
	params map[string]string
}

// sent records values as sent together by the credential, to the
// request's origin or elsewhere (a client secret sent to a token
// endpoint, which may still come back in an error that quotes it), for
// the host to look for in every response from then on.
func (a *applying) sent(values ...string) {
	if known.add(time.Time{}, values...) {
		klog.InfoS("a credential's secret is too short for the host to recognise in responses, where a module may read it back",
			"module", a.auth.module, "credential", a.cred.Name, "minimumBytes", minReflectedLen)
	}
}

// bearerValues are what a bearer token is sent as: "Bearer <token>" too,
// for a token too short to be looked for alone.
func bearerValues(token string) []string { return []string{token, "Bearer " + token} }

// setBearer sends token as a bearer token.
func (a *applying) setBearer(req *http.Request, token string) {
	values := bearerValues(token)
	a.sent(values...)
	req.Header.Set("Authorization", values[1])
}

// secret reads a Secret key for the host's own use, trimmed of the
// surrounding white space files tend to end with.
func (a *applying) secret(key string) (string, error) {
	b, err := a.readKey(key)
	if err != nil {
		return "", err
	}
	v := string(bytes.TrimSpace(b))
	if v == "" {
		return "", fmt.Errorf("key %q is empty", key)
	}
	if err := checkHeaderValue(v); err != nil {
		return "", fmt.Errorf("key %q %v", key, err)
	}
	return v, nil
}

// readKey reads a Secret key through the rotation-aware cache.
func (a *applying) readKey(key string) ([]byte, error) {
	b, err := a.auth.store.read(key)
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

// token returns the credential's current OAuth2 access token, obtained
// with fetch when it has none or it is due for refresh. secrets are what
// fetch uses: when they change, the token obtained with the others is
// dropped.
func (a *applying) token(ctx context.Context, secrets [][]byte, fetch func(context.Context) (*oauth2.Token, error)) (string, error) {
	h := sha256.New()
	for _, s := range secrets {
		fmt.Fprintf(h, "%d:", len(s))
		h.Write(s)
	}
	tok, err := a.cred.tokens.get(ctx, [sha256.Size]byte(h.Sum(nil)), fetch)
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}
