package registry

import (
	"fmt"
	"os"

	"github.com/docker/cli/cli/config"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// fileKeychain reads credentials from one docker config.json, named in
// depsd's configuration, instead of the process's default locations: a
// daemon's credentials belong in its configuration, not in whichever home
// directory it happens to run with. Credential helpers (credsStore,
// credHelpers) named in the file are honoured.
type fileKeychain struct{ path string }

// Resolve implements authn.Keychain. A registry the file has no entry for
// is accessed anonymously (with the token flow where the registry asks).
func (k fileKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	f, err := os.Open(k.path)
	if err != nil {
		return nil, fmt.Errorf("registry auth file: %w", err)
	}
	defer f.Close()
	cf, err := config.LoadFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("registry auth file %s: %w", k.path, err)
	}
	for _, key := range []string{target.String(), target.RegistryStr()} {
		if key == name.DefaultRegistry {
			key = authn.DefaultAuthKey
		}
		ac, err := cf.GetAuthConfig(key)
		if err != nil {
			return nil, fmt.Errorf("registry auth file %s: credentials for %s: %w", k.path, key, err)
		}
		if ac.Username != "" || ac.Password != "" || ac.Auth != "" || ac.IdentityToken != "" || ac.RegistryToken != "" {
			return authn.FromConfig(authn.AuthConfig{
				Username:      ac.Username,
				Password:      ac.Password,
				Auth:          ac.Auth,
				IdentityToken: ac.IdentityToken,
				RegistryToken: ac.RegistryToken,
			}), nil
		}
	}
	return authn.Anonymous, nil
}
