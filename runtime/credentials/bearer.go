package credentials

import "net/http"

// BearerAuth sends "Authorization: Bearer <the value of Key>".
type BearerAuth struct {
	// Key is the Secret key that holds the token.
	Key string `json:"key"`
}

func (b *BearerAuth) keys() []string       { return []string{b.Key} }
func (b *BearerAuth) secretKeys() []string { return b.keys() }
func (b *BearerAuth) validate() []error    { return nil }
func (b *BearerAuth) header() string       { return "Authorization" }

func (b *BearerAuth) apply(req *http.Request, a *applying) error {
	token, err := a.secret(b.Key)
	if err != nil {
		return err
	}
	a.setBearer(req, token)
	return nil
}
