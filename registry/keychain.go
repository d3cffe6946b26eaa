package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
	a, _, err := lookup(k.path, target)
	return a, err
}

// defaultKeychain looks where podman and docker keep credentials, in
// podman's order: $REGISTRY_AUTH_FILE, ${XDG_RUNTIME_DIR}/containers/auth.json,
// ${XDG_CONFIG_HOME:-~/.config}/containers/auth.json, then docker's
// $DOCKER_CONFIG/config.json (or ~/.docker/config.json). The first file
// with an entry for the registry wins; missing files are skipped, and a
// registry no file names is accessed anonymously. The files are read at
// each Resolve, so credentials rotated on disk are picked up.
// (go-containerregistry's DefaultKeychain reads only the first file that
// exists, so a docker config.json without the registry hides podman's.)
type defaultKeychain struct{}

func (defaultKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	for _, path := range authFiles() {
		a, found, err := lookup(path, target)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil || found {
			return a, err
		}
	}
	return authn.Anonymous, nil
}

// authFiles lists the default credential files, in the order they count.
func authFiles() []string {
	var out []string
	if p := os.Getenv("REGISTRY_AUTH_FILE"); p != "" {
		out = append(out, p)
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		out = append(out, filepath.Join(d, "containers", "auth.json"))
	}
	home, _ := os.UserHomeDir()
	cfg := os.Getenv("XDG_CONFIG_HOME")
	if cfg == "" && home != "" {
		cfg = filepath.Join(home, ".config")
	}
	if cfg != "" {
		out = append(out, filepath.Join(cfg, "containers", "auth.json"))
	}
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		out = append(out, filepath.Join(d, "config.json"))
	} else if home != "" {
		out = append(out, filepath.Join(home, ".docker", "config.json"))
	}
	return out
}

// lookup reads target's credentials from the auth file at path: found is
// false (and the authenticator anonymous) when the file has no entry. An
// error wraps fs.ErrNotExist when the file does not exist.
func lookup(path string, target authn.Resource) (a authn.Authenticator, found bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("registry auth file: %w", err)
	}
	defer f.Close()
	cf, err := config.LoadFromReader(f)
	if err != nil {
		return nil, false, fmt.Errorf("registry auth file %s: %w", path, err)
	}
	for _, key := range []string{target.String(), target.RegistryStr()} {
		if key == name.DefaultRegistry {
			key = authn.DefaultAuthKey
		}
		ac, err := cf.GetAuthConfig(key)
		if err != nil {
			return nil, false, fmt.Errorf("registry auth file %s: credentials for %s: %w", path, key, err)
		}
		if ac.Username != "" || ac.Password != "" || ac.Auth != "" || ac.IdentityToken != "" || ac.RegistryToken != "" {
			return authn.FromConfig(authn.AuthConfig{
				Username:      ac.Username,
				Password:      ac.Password,
				Auth:          ac.Auth,
				IdentityToken: ac.IdentityToken,
				RegistryToken: ac.RegistryToken,
			}), true, nil
		}
	}
	return authn.Anonymous, false, nil
}
