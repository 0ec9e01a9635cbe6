package credentials

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// GoogleServiceAccountAuth sends a bearer token the host obtains by
// exchanging a JWT signed with a Google service account key.
type GoogleServiceAccountAuth struct {
	// Key holds the service account's JSON key file.
	Key string `json:"key"`
	// Scopes are the OAuth2 scopes the token is asked for.
	Scopes []string `json:"scopes"`
	// TokenURL overrides the key file's token_uri.
	TokenURL string `json:"tokenURL,omitempty"`
}

func (g *GoogleServiceAccountAuth) keys() []string       { return []string{g.Key} }
func (g *GoogleServiceAccountAuth) secretKeys() []string { return g.keys() }
func (g *GoogleServiceAccountAuth) header() string       { return "Authorization" }

func (g *GoogleServiceAccountAuth) validate() []error {
	var errs []error
	if len(g.Scopes) == 0 {
		errs = append(errs, errors.New("scopes are required"))
	}
	if err := validTokenURL(g.TokenURL, false); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func (g *GoogleServiceAccountAuth) apply(req *http.Request, a *applying) error {
	key, err := a.readKey(g.Key)
	if err != nil {
		return err
	}
	token, err := a.token(req.Context(), [][]byte{key}, func(ctx context.Context) (*oauth2.Token, error) {
		conf, err := google.JWTConfigFromJSON(key, g.Scopes...)
		if err != nil {
			return nil, fmt.Errorf("key %q is not a Google service account JSON key: %w", g.Key, err)
		}
		if g.TokenURL != "" {
			conf.TokenURL = g.TokenURL
		}
		// A fresh source per exchange: the token cache decides when.
		tok, err := conf.TokenSource(ctx).Token()
		if err != nil {
			return nil, tokenExchangeError(conf.TokenURL, err)
		}
		return tok, nil
	})
	if err != nil {
		return err
	}
	a.setBearer(req, token)
	return nil
}
