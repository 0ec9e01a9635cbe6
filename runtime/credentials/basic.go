package credentials

import "net/http"

// BasicAuth sends HTTP basic authentication.
type BasicAuth struct {
	// UsernameKey is the Secret key that holds the user name.
	UsernameKey string `json:"usernameKey"`
	// PasswordKey is the Secret key that holds the password.
	PasswordKey string `json:"passwordKey"`
}

func (b *BasicAuth) keys() []string       { return []string{b.UsernameKey, b.PasswordKey} }
func (b *BasicAuth) secretKeys() []string { return []string{b.PasswordKey} }
func (b *BasicAuth) validate() []error    { return nil }
func (b *BasicAuth) header() string       { return "Authorization" }

// apply records the password alone, with the user name, and encoded as
// sent: a password too short to be looked for alone is still found in
// the others.
func (b *BasicAuth) apply(req *http.Request, a *applying) error {
	user, err := a.secret(b.UsernameKey)
	if err != nil {
		return err
	}
	password, err := a.secret(b.PasswordKey)
	if err != nil {
		return err
	}
	req.SetBasicAuth(user, password)
	a.sent(password, user+":"+password, req.Header.Get("Authorization"))
	return nil
}
