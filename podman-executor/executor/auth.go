package executor

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// credentials picks the registry credentials for pulling image, in the
// order GitLab's docker executor uses: the job's DOCKER_AUTH_CONFIG, the
// runner host's DOCKER_AUTH_CONFIG, the credentials in the job payload,
// CI_REGISTRY_USER/CI_REGISTRY_PASSWORD for CI_REGISTRY, and last the
// driver's auth file. source names where they came from, for the job log;
// it never contains a secret.
func credentials(image string, j Job, c Config) (auth container.Auth, source string) {
	host := registryHost(image)
	if u, p, ok := fromDockerAuthConfig(j.Vars["DOCKER_AUTH_CONFIG"], host); ok {
		return container.Auth{Username: u, Password: p}, "job DOCKER_AUTH_CONFIG"
	}
	if u, p, ok := fromDockerAuthConfig(j.Driver["DOCKER_AUTH_CONFIG"], host); ok {
		return container.Auth{Username: u, Password: p}, "runner DOCKER_AUTH_CONFIG"
	}
	for _, cr := range j.Response.Credentials {
		if strings.EqualFold(cr.Type, "registry") && normalizeRegistry(cr.URL) == host && cr.Username != "" {
			return container.Auth{Username: cr.Username, Password: cr.Password}, "job credentials for " + host
		}
	}
	if reg := normalizeRegistry(j.Vars["CI_REGISTRY"]); reg != "" && reg == host && j.Vars["CI_REGISTRY_USER"] != "" {
		return container.Auth{Username: j.Vars["CI_REGISTRY_USER"], Password: j.Vars["CI_REGISTRY_PASSWORD"]}, "CI_REGISTRY_USER"
	}
	if c.AuthFile != "" {
		return container.Auth{AuthFile: c.AuthFile}, "auth file " + c.AuthFile
	}
	return container.Auth{}, ""
}

// fromDockerAuthConfig finds host's credentials in a docker config.json
// ({"auths": {"host": {"auth": base64(user:pass)}}}).
func fromDockerAuthConfig(raw, host string) (user, pass string, ok bool) {
	if strings.TrimSpace(raw) == "" {
		return "", "", false
	}
	var cfg struct {
		Auths map[string]struct {
			Auth     string `json:"auth"`
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"auths"`
	}
	if json.Unmarshal([]byte(raw), &cfg) != nil {
		return "", "", false
	}
	for key, a := range cfg.Auths {
		if normalizeRegistry(key) != host {
			continue
		}
		if a.Username != "" {
			return a.Username, a.Password, true
		}
		dec, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			continue
		}
		if u, p, found := strings.Cut(string(dec), ":"); found {
			return u, p, true
		}
	}
	return "", "", false
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
