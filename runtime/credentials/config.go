// Package credentials holds a module's secrets and applies them to its
// requests, so that the module itself never holds them.
//
// The operator's configuration (Config) names a directory of Secret keys
// (Store, which follows the kubelet's rotation of a Secret volume), the
// keys a module may read raw, and the credentials its requests may name
// with the abi.HeaderCredential header (AuthConfig), each bound to the
// origins it may be sent to and applied by one scheme: bearer, basic,
// header, sigv4, oauth2ClientCredentials or googleServiceAccount. Each
// scheme is a type implementing scheme, registered in schemes; the two
// that obtain an OAuth2 token share one token cache per module and
// credential (token.go).
//
// An Authenticator checks what a request asks before it is sent
// (Authorize) and applies the credential at every redirect hop of its
// transport (Transport). Redact overwrites in every response the secrets
// the process may send, whichever module's they are, which a server may
// have echoed or kept (redact.go).
// NewTransport does the same for a provider run natively, outside the
// host.
package credentials

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/origin"
)

// Config governs the module's credentials: the host applies them to the
// module's requests; the module reads none unless the operator makes it
// readable.
type Config struct {
	// Dir holds one file per Secret key, as a Secret volume mounts them.
	Dir string `json:"dir,omitempty"`
	// Auth lists the credentials requests may name, each bound to origins.
	Auth []AuthConfig `json:"auth,omitempty"`
	// Readable lists the Secret keys the credential import serves raw.
	// Empty by default: a module that holds a secret can publish it (in a
	// Node label, an address, a log line), so each name here weakens the
	// sandbox's isolation.
	Readable []string `json:"readable,omitempty"`

	// OnAuthFailure, when set, is told when a credential cannot be applied
	// (a missing or malformed secret, a failed token exchange), at most
	// once per credential per minute; the CCM turns it into an Event.
	OnAuthFailure func(credential string, err error) `json:"-"`
}

// AuthConfig is one credential a module's requests may name (with the
// abi.HeaderCredential header): the origins it may be sent to and the one
// scheme that applies it. Secrets are Secret keys in Config.Dir, read by
// the host at send time; the module never holds them.
type AuthConfig struct {
	// Name is what the module names.
	Name string `json:"name"`
	// Origins are the "scheme://host[:port]" destinations the credential
	// is applied to, each also in the allowed origins. A request, or a
	// redirect hop, to any other origin that names it is refused.
	Origins []string `json:"origins"`

	// Exactly one scheme, each registered in schemes.

	// Bearer sends "Authorization: Bearer <token>".
	Bearer *BearerAuth `json:"bearer,omitempty"`
	// Basic sends HTTP basic authentication.
	Basic *BasicAuth `json:"basic,omitempty"`
	// Header sends a secret as the value of a named header.
	Header *HeaderAuth `json:"header,omitempty"`
	// SigV4 signs each request with AWS Signature Version 4.
	SigV4 *SigV4Auth `json:"sigv4,omitempty"`
	// OAuth2ClientCredentials exchanges a client ID and secret for tokens.
	OAuth2ClientCredentials *OAuth2ClientCredentialsAuth `json:"oauth2ClientCredentials,omitempty"`
	// GoogleServiceAccount exchanges a service account key for tokens.
	GoogleServiceAccount *GoogleServiceAccountAuth `json:"googleServiceAccount,omitempty"`
}

// Validate checks a credentials configuration against the module's
// allowed origins, naming every problem.
func Validate(c Config, allowedOrigins []string) error {
	allowed, err := origin.ParseSet(allowedOrigins)
	if err != nil {
		return err
	}
	errs := validateAuth(c.Auth, allowed)
	for _, name := range c.Readable {
		if err := ValidName(name); err != nil {
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
func validateAuth(auth []AuthConfig, allowed origin.Set) []error {
	var errs []error
	seen := map[string]bool{}
	for i := range auth {
		a := &auth[i]
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("auth[%d] (%s): %s", i, a.Name, fmt.Sprintf(format, args...)))
		}
		if checkHeaderValue(a.Name) != nil || ValidName(a.Name) != nil {
			fail("name %q is not a plain name", a.Name)
		}
		if seen[a.Name] {
			fail("name %q is listed twice", a.Name)
		}
		seen[a.Name] = true
		if len(a.Origins) == 0 {
			fail("no origins: a credential is applied only to the origins bound to it")
		}
		origins, err := origin.ParseSet(a.Origins)
		if err != nil {
			fail("%v", err)
		}
		for o := range origins {
			if allowed != nil && !allowed[o] {
				fail("origin %s is not in http.allowedOrigins", o)
			}
		}
		name, s, n := a.scheme()
		if n != 1 {
			fail("set exactly one of %s (%d set)", strings.Join(schemeNames(), ", "), n)
			continue
		}
		for _, key := range s.keys() {
			if err := ValidName(key); err != nil {
				fail("%s: %v", name, err)
			}
		}
		for _, err := range s.validate() {
			fail("%s: %v", name, err)
		}
	}
	return errs
}

// SecretKeys lists, once each, the Secret keys the configuration reads:
// the secrets tools look for where they must not appear.
func (c Config) SecretKeys() []string {
	var keys []string
	seen := map[string]bool{}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for i := range c.Auth {
		if _, s, _ := c.Auth[i].scheme(); s != nil {
			for _, k := range s.keys() {
				add(k)
			}
		}
	}
	for _, k := range c.Readable {
		add(k)
	}
	return keys
}

// errControlCharacter refuses what would split or corrupt a header.
var errControlCharacter = errors.New("contains a control character")

func checkHeaderValue(v string) error {
	if !httpguts.ValidHeaderFieldValue(v) {
		return errControlCharacter
	}
	return nil
}

// reservedHeader says whether a request's header is one the host reads
// and removes, abi.HeaderPrefix in any case.
func reservedHeader(header string) bool {
	return len(header) >= len(abi.HeaderPrefix) && strings.EqualFold(header[:len(abi.HeaderPrefix)], abi.HeaderPrefix)
}
