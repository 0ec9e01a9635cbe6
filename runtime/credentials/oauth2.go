package credentials

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuth2ClientCredentialsAuth sends a bearer token the host obtains from
// TokenURL with the OAuth2 client credentials grant (Azure, Keycloak and
// most OAuth2 servers).
type OAuth2ClientCredentialsAuth struct {
	// TokenURL is the token endpoint, asked by the host.
	TokenURL string `json:"tokenURL"`
	// ClientIDKey is the Secret key that holds the client ID.
	ClientIDKey string `json:"clientIDKey"`
	// ClientSecretKey is the Secret key that holds the client secret.
	ClientSecretKey string `json:"clientSecretKey"`
	// Scopes are the OAuth2 scopes the token is asked for.
	Scopes []string `json:"scopes,omitempty"`
}

func (o *OAuth2ClientCredentialsAuth) keys() []string {
	return []string{o.ClientIDKey, o.ClientSecretKey}
}
func (o *OAuth2ClientCredentialsAuth) secretKeys() []string { return []string{o.ClientSecretKey} }
func (o *OAuth2ClientCredentialsAuth) header() string       { return "Authorization" }

func (o *OAuth2ClientCredentialsAuth) validate() []error {
	if err := validTokenURL(o.TokenURL, true); err != nil {
		return []error{err}
	}
	return nil
}

func (o *OAuth2ClientCredentialsAuth) apply(req *http.Request, a *applying) error {
	id, err := a.secret(o.ClientIDKey)
	if err != nil {
		return err
	}
	secret, err := a.secret(o.ClientSecretKey)
	if err != nil {
		return err
	}
	// Sent to the token endpoint only, yet looked for in what reaches the
	// module: in an error that quotes a redirect, for one.
	a.sent(secret)
	conf := a.cred.tokens.clientConfig(o, id, secret)
	token, err := a.token(req.Context(), [][]byte{[]byte(id), []byte(secret)}, func(ctx context.Context) (*oauth2.Token, error) {
		tok, err := conf.Token(ctx)
		if err != nil {
			return nil, tokenExchangeError(o.TokenURL, err)
		}
		return tok, nil
	})
	if err != nil {
		return err
	}
	a.setBearer(req, token)
	return nil
}

// clientConfig returns the client credentials configuration of o for id
// and secret, the same one while they do not change, so that the OAuth2
// library remembers how the token endpoint wants them sent.
func (c *tokenCache) clientConfig(o *OAuth2ClientCredentialsAuth, id, secret string) *clientcredentials.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil || c.client.ClientID != id || c.client.ClientSecret != secret {
		c.client = &clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: o.TokenURL, Scopes: o.Scopes}
	}
	return c.client
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

// oauth2ErrorCodes are RFC 6749's token error codes (section 5.2): the
// only words of the token endpoint's answer an error repeats.
var oauth2ErrorCodes = map[string]bool{"invalid_request": true, "invalid_client": true, "invalid_grant": true,
	"unauthorized_client": true, "unsupported_grant_type": true, "invalid_scope": true}

// tokenExchangeError is what a failed exchange says, in the module's
// errors, the log and the Events. An answer of the token endpoint is told
// by its status and standard error code alone: its body, and the
// description and URI the OAuth2 library reads from it, may echo the
// client secret or the signed assertion.
func tokenExchangeError(tokenURL string, err error) error {
	var answer *oauth2.RetrieveError
	if !errors.As(err, &answer) {
		return fmt.Errorf("token exchange with %s: %w", tokenURL, err)
	}
	msg := fmt.Sprintf("token exchange with %s: the token endpoint answered", tokenURL)
	if answer.Response != nil {
		msg += fmt.Sprintf(" %d", answer.Response.StatusCode)
	}
	if oauth2ErrorCodes[answer.ErrorCode] {
		msg += " " + answer.ErrorCode
	}
	return errors.New(msg)
}
