package credentials

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Token exchanges: the host, not the module, asks the token endpoint, with
// its own client and timeout. Endpoints come from the operator's
// configuration, so the client is an ordinary one (environment proxies
// included), not the module's guarded one.
const (
	tokenTimeout = 10 * time.Second
	// tokenRefreshMargin is how long before its expiry a token is
	// replaced, at most: a quarter of its lifetime when that is shorter.
	tokenRefreshMargin = time.Minute
	// A failed exchange is not tried again for tokenBackoffMin, doubling
	// at each failure up to tokenBackoffMax: a broken credential costs
	// the token endpoint one request per backoff, however many calls need
	// it.
	tokenBackoffMin = time.Second
	tokenBackoffMax = time.Minute
)

// tokenRejectAfter is how old a token must be before a 401 to a request
// that carried it makes the host drop it (tokenCache.reject): a token
// revoked at the server is replaced at the next request instead of at its
// expiry, while a cloud that answers 401 to every token costs the token
// endpoint at most one exchange per tokenRejectAfter.
var tokenRejectAfter = 10 * time.Second

var tokenHTTPClient = &http.Client{Timeout: tokenTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}

// tokenCaches holds one tokenCache per module name and token
// configuration, so that every instance of a module, and the next module
// generation after a hot reload, share one token. Keys come from the
// operator's configuration, which changes only with a restart.
var tokenCaches sync.Map // string -> *tokenCache

func sharedTokenCache(module string, c *AuthConfig) *tokenCache {
	id, _ := json.Marshal(struct {
		Module string
		Auth   *AuthConfig
	}{module, c})
	v, _ := tokenCaches.LoadOrStore(string(id), &tokenCache{})
	return v.(*tokenCache)
}

// tokenCache keeps one credential's current token and fetches the next
// one once for all callers, refreshing it before it expires.
type tokenCache struct {
	mu sync.Mutex
	// secrets is the digest of the secrets the token was obtained with;
	// when the Secret changes, the token and any failure are forgotten.
	secrets   [sha256.Size]byte
	token     *oauth2.Token
	refreshAt time.Time
	obtained  time.Time
	// fetching is closed when the exchange in flight ends.
	fetching chan struct{}
	err      error
	retryAt  time.Time
	backoff  time.Duration

	// client is the client credentials configuration of the
	// oauth2ClientCredentials scheme (clientConfig).
	client *clientcredentials.Config
}

// get returns the current token, fetching one with fetch when there is
// none or it is due for refresh. Concurrent callers wait for one exchange.
func (c *tokenCache) get(ctx context.Context, secrets [sha256.Size]byte, fetch func(context.Context) (*oauth2.Token, error)) (*oauth2.Token, error) {
	for {
		c.mu.Lock()
		if secrets != c.secrets {
			c.secrets, c.token, c.err, c.backoff = secrets, nil, nil, 0
		}
		now := time.Now()
		if c.token != nil && now.Before(c.refreshAt) {
			t := c.token
			c.mu.Unlock()
			return t, nil
		}
		if wait := c.fetching; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if c.err != nil && now.Before(c.retryAt) {
			t, err := c.token, c.err
			retry := c.retryAt.Sub(now).Round(time.Millisecond)
			c.mu.Unlock()
			if t != nil && now.Before(t.Expiry) {
				return t, nil // the refresh failed, the token still holds
			}
			return nil, fmt.Errorf("%w (not tried again for %s)", err, retry)
		}
		c.fetching = make(chan struct{})
		c.mu.Unlock()
		// The exchange runs on its own, so that the caller that started
		// it waits for it as the others do, no longer than its call may
		// last; the loop then reads what it left.
		go c.exchange(now, secrets, fetch)
	}
}

// exchange runs one token exchange and records its outcome for the
// secrets it was started with, then wakes the callers waiting for it.
func (c *tokenCache) exchange(started time.Time, secrets [sha256.Size]byte, fetch func(context.Context) (*oauth2.Token, error)) {
	tok, err := c.fetch(fetch)
	if err == nil {
		// Known before any module sends it, for every module: an origin
		// may return it to one that has not.
		known.add(tok.Expiry, bearerValues(tok.AccessToken)...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if secrets == c.secrets {
		if err != nil {
			c.err, c.backoff = err, min(max(2*c.backoff, tokenBackoffMin), tokenBackoffMax)
			c.retryAt = time.Now().Add(c.backoff)
		} else {
			c.token, c.refreshAt, c.obtained, c.err, c.backoff = tok, refreshTime(started, tok.Expiry), time.Now(), nil, 0
		}
	}
	close(c.fetching)
	c.fetching = nil
}

// reject drops the current token when it is accessToken, which the cloud
// has just refused with a 401, and is at least tokenRejectAfter old; the
// next request then fetches a new one.
func (c *tokenCache) reject(accessToken string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != nil && c.token.AccessToken == accessToken && time.Since(c.obtained) >= tokenRejectAfter {
		c.token = nil
	}
}

// fetch runs one exchange on its own deadline, not the caller's: other
// callers wait for its result.
func (c *tokenCache) fetch(fetch func(context.Context) (*oauth2.Token, error)) (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), oauth2.HTTPClient, tokenHTTPClient), tokenTimeout)
	defer cancel()
	tok, err := fetch(ctx)
	if err == nil && (tok == nil || tok.AccessToken == "") {
		err = fmt.Errorf("the token endpoint answered no access token")
	}
	if err == nil {
		err = checkHeaderValue(tok.AccessToken)
	}
	if err != nil {
		return nil, err
	}
	return tok, nil
}

// refreshTime is when a token obtained at now and expiring at expiry is
// replaced: tokenRefreshMargin before it expires, or a quarter of its
// lifetime when that is shorter. A token without expiry is kept.
func refreshTime(now, expiry time.Time) time.Time {
	if expiry.IsZero() {
		return time.Unix(1<<62, 0)
	}
	return expiry.Add(-min(tokenRefreshMargin, max(expiry.Sub(now)/4, 0)))
}
