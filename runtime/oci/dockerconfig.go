package oci

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// dockerConfig is the part of a docker config file (config.json, or the
// .dockerconfigjson key of a kubernetes.io/dockerconfigjson Secret) that
// holds credentials inline.
type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Auth          string `json:"auth,omitempty"` // base64 of "user:password"
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// DockerConfigKeychain returns the credentials of the docker config file at
// path, read on every use so that a rotated pull secret takes effect
// without a restart. Only inline "auths" entries count: credential helpers
// would run programs, which the CCM never does. A registry without an
// entry is accessed anonymously.
func DockerConfigKeychain(path string) authn.Keychain {
	return dockerConfigKeychain(path)
}

type dockerConfigKeychain string

func (path dockerConfigKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	data, err := os.ReadFile(string(path))
	if err != nil {
		return nil, fmt.Errorf("registry credentials: %w", err)
	}
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("registry credentials %s: %w", path, err)
	}
	for key, auth := range cfg.Auths {
		if registryHost(key) != registryHost(target.RegistryStr()) {
			continue
		}
		if auth.Auth != "" {
			decoded, err := base64.StdEncoding.DecodeString(auth.Auth)
			if err != nil {
				return nil, fmt.Errorf("registry credentials %s: auth of %s: %w", path, key, err)
			}
			user, pass, ok := strings.Cut(string(decoded), ":")
			if !ok {
				return nil, fmt.Errorf("registry credentials %s: auth of %s is not user:password", path, key)
			}
			auth.Username, auth.Password = user, pass
		}
		return authn.FromConfig(authn.AuthConfig{
			Username:      auth.Username,
			Password:      auth.Password,
			IdentityToken: auth.IdentityToken,
			RegistryToken: auth.RegistryToken,
		}), nil
	}
	return authn.Anonymous, nil
}

// registryHost reduces a docker config key, which may be a bare host or a
// URL such as https://index.docker.io/v1/, to the registry's host.
func registryHost(key string) string {
	if u, err := url.Parse(key); err == nil && u.Host != "" {
		key = u.Host
	}
	key = strings.ToLower(strings.TrimSuffix(key, "/"))
	if key == "index.docker.io" || key == "registry-1.docker.io" || key == "docker.io" {
		return name.DefaultRegistry
	}
	return key
}
