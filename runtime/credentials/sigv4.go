package credentials

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/wasmccm/wasmccm/abi"
)

// SigV4Auth signs requests with AWS Signature Version 4. Region and
// Service are defaults that a request may override with the
// abi.HeaderSigV4Region and abi.HeaderSigV4Service headers.
type SigV4Auth struct {
	// AccessKeyIDKey is the Secret key that holds the access key's ID.
	AccessKeyIDKey string `json:"accessKeyIDKey"`
	// SecretAccessKeyKey is the Secret key that holds its secret.
	SecretAccessKeyKey string `json:"secretAccessKeyKey"`
	// SessionTokenKey, when set, holds a session token of temporary
	// credentials.
	SessionTokenKey string `json:"sessionTokenKey,omitempty"`
	// Region is the default a request may override with
	// abi.HeaderSigV4Region.
	Region string `json:"region,omitempty"`
	// Service is the default a request may override with
	// abi.HeaderSigV4Service.
	Service string `json:"service,omitempty"`
}

// emptyPayloadHash is the SHA-256 of no bytes, SigV4's hash of a request
// without a body.
const emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func (s *SigV4Auth) keys() []string {
	keys := []string{s.AccessKeyIDKey, s.SecretAccessKeyKey}
	if s.SessionTokenKey != "" {
		keys = append(keys, s.SessionTokenKey)
	}
	return keys
}

// secretKeys holds the secret access key, never sent, yet a secret.
func (s *SigV4Auth) secretKeys() []string {
	if s.SessionTokenKey != "" {
		return []string{s.SecretAccessKeyKey, s.SessionTokenKey}
	}
	return []string{s.SecretAccessKeyKey}
}

func (s *SigV4Auth) validate() []error { return nil }
func (s *SigV4Auth) header() string    { return "Authorization" }
func (s *SigV4Auth) params() []string {
	return []string{abi.HeaderSigV4Service, abi.HeaderSigV4Region}
}

func (s *SigV4Auth) apply(req *http.Request, a *applying) error {
	service, region := a.params[abi.HeaderSigV4Service], a.params[abi.HeaderSigV4Region]
	if service == "" {
		service = s.Service
	}
	if region == "" {
		region = s.Region
	}
	if service == "" || region == "" {
		return fmt.Errorf("sigv4 needs a service and a region: set sigv4.service and sigv4.region, or send %s and %s",
			abi.HeaderSigV4Service, abi.HeaderSigV4Region)
	}
	var creds aws.Credentials
	var err error
	if creds.AccessKeyID, err = a.secret(s.AccessKeyIDKey); err != nil {
		return err
	}
	if creds.SecretAccessKey, err = a.secret(s.SecretAccessKeyKey); err != nil {
		return err
	}
	if s.SessionTokenKey != "" {
		if creds.SessionToken, err = a.secret(s.SessionTokenKey); err != nil {
			return err
		}
	}
	// The secret access key never leaves the host, only signatures made
	// with it; the session token is sent as it is.
	if creds.SessionToken != "" {
		a.sent(creds.SessionToken)
	}
	hash, err := payloadHash(req)
	if err != nil {
		return err
	}
	return a.auth.signer.SignHTTP(req.Context(), creds, req, hash, service, region, a.auth.now())
}

// payloadHash is the hex SHA-256 of req's body. Every hop signs its own
// copy of the body.
func payloadHash(req *http.Request) (string, error) {
	if req.GetBody == nil || req.ContentLength == 0 {
		return emptyPayloadHash, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return "", err
	}
	defer body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, body); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
