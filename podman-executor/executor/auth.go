package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containers/image/v5/docker/reference"
	dockerconfig "github.com/containers/image/v5/pkg/docker/config"
	"github.com/containers/image/v5/types"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// credentials picks the registry credentials for pulling image, in the
// order GitLab's docker executor uses: the job's DOCKER_AUTH_CONFIG, the
// runner host's DOCKER_AUTH_CONFIG, the credentials in the job payload,
// CI_REGISTRY_USER/CI_REGISTRY_PASSWORD for CI_REGISTRY, and last the
// driver's auth file. source names where they came from, for the job log;
// it never contains a secret. scratch is a private directory for the
// files containers/image reads. A malformed job DOCKER_AUTH_CONFIG is the
// job's error.
func credentials(image string, j Job, c Config, scratch string) (auth container.Auth, source string, err error) {
	host := registryHost(image)
	a, ok, err := fromDockerAuthConfig(j.Vars["DOCKER_AUTH_CONFIG"], image, filepath.Join(scratch, "job"))
	if err != nil {
		return container.Auth{}, "", &JobError{Msg: "job variable DOCKER_AUTH_CONFIG: " + err.Error()}
	}
	if ok {
		return a, "job DOCKER_AUTH_CONFIG", nil
	}
	a, ok, err = fromDockerAuthConfig(j.Driver["DOCKER_AUTH_CONFIG"], image, filepath.Join(scratch, "runner"))
	if err != nil {
		return container.Auth{}, "", fmt.Errorf("runner DOCKER_AUTH_CONFIG: %w", err)
	}
	if ok {
		return a, "runner DOCKER_AUTH_CONFIG", nil
	}
	for _, cr := range j.Response.Credentials {
		if strings.EqualFold(cr.Type, "registry") && normalizeRegistry(cr.URL) == host && cr.Username != "" {
			return container.Auth{Username: cr.Username, Password: cr.Password}, "job credentials for " + host, nil
		}
	}
	if reg := normalizeRegistry(j.Vars["CI_REGISTRY"]); reg != "" && reg == host && j.Vars["CI_REGISTRY_USER"] != "" {
		return container.Auth{Username: j.Vars["CI_REGISTRY_USER"], Password: j.Vars["CI_REGISTRY_PASSWORD"]}, "CI_REGISTRY_USER", nil
	}
	if c.AuthFile != "" {
		return container.Auth{AuthFile: c.AuthFile}, "auth file " + c.AuthFile, nil
	}
	return container.Auth{}, "", nil
}

// dockerConfig is the part of a docker config.json checked before handing
// it to containers/image (which reads auths and credHelpers itself).
type dockerConfig struct {
	Auths       map[string]json.RawMessage `json:"auths"`
	CredHelpers map[string]string          `json:"credHelpers"`
	CredsStore  string                     `json:"credsStore"`
}

// fromDockerAuthConfig finds the credentials for image in a docker
// config.json (the DOCKER_AUTH_CONFIG variable) with containers/image's
// pkg/docker/config, as podman reads auth files: per-repository keys
// ("registry/ns/repo"), credHelpers and identitytoken; credsStore is used
// as the helper for registries without an entry, as docker does. The
// files it needs go in dir (created 0700, left for the caller's scratch
// cleanup). Malformed JSON is an error that quotes none of the text.
func fromDockerAuthConfig(raw, image, dir string) (container.Auth, bool, error) {
	if strings.TrimSpace(raw) == "" {
		return container.Auth{}, false, nil
	}
	var cfg dockerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return container.Auth{}, false, fmt.Errorf("not valid JSON (syntax error at byte %d)", se.Offset)
		}
		return container.Auth{}, false, errors.New("not a docker config.json ({\"auths\": {...}})")
	}
	if strings.ContainsAny(cfg.CredsStore, "/\"\n") {
		return container.Auth{}, false, errors.New("credsStore must be a helper name (docker-credential-NAME on PATH)")
	}
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return container.Auth{}, false, fmt.Errorf("image %q: %w", image, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return container.Auth{}, false, err
	}
	authFile := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(authFile, []byte(raw), 0o600); err != nil {
		return container.Auth{}, false, err
	}
	// The helpers containers/image consults: this file, then credsStore.
	// Written out so that the host's registries.conf does not add others.
	helpers := `"containers-auth.json"`
	if cfg.CredsStore != "" {
		helpers += `, "` + cfg.CredsStore + `"`
	}
	conf := filepath.Join(dir, "registries.conf")
	if err := os.WriteFile(conf, []byte("credential-helpers = ["+helpers+"]\n"), 0o600); err != nil {
		return container.Auth{}, false, err
	}
	sys := &types.SystemContext{AuthFilePath: authFile, SystemRegistriesConfPath: conf,
		SystemRegistriesConfDirPath: filepath.Join(dir, "registries.conf.d")}
	creds, err := dockerconfig.GetCredentialsForRef(sys, ref)
	if err != nil {
		return container.Auth{}, false, fmt.Errorf("credentials for %s: %w", reference.Domain(ref), redactHelperError(err))
	}
	switch {
	case creds.IdentityToken != "":
		return container.Auth{IdentityToken: creds.IdentityToken, Registry: reference.Domain(ref)}, true, nil
	case creds.Username != "" || creds.Password != "":
		return container.Auth{Username: creds.Username, Password: creds.Password}, true, nil
	}
	return container.Auth{}, false, nil
}

// redactHelperError keeps a credential helper's failure to one line; the
// helpers print their own messages, never the secret they failed to give.
func redactHelperError(err error) error {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return errors.New(msg)
}

// normalizeRegistry reduces "https://index.docker.io/v1/" or
// "registry.example.com/" to the host as registryHost reports it.
func normalizeRegistry(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
	s, _, _ = strings.Cut(s, "/")
	switch s {
	case "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		return "docker.io"
	}
	return s
}
