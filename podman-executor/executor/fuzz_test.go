package executor

import (
	"strings"
	"testing"
)

// FuzzServices: CI_JOB_SERVICES comes from the job's .gitlab-ci.yml; no
// input may panic the prepare stage, and every alias is non-empty.
func FuzzServices(f *testing.F) {
	f.Add(`[{"name":"redis:7","alias":"cache, db","entrypoint":["x"],"command":null}]`)
	f.Add(``)
	f.Add(`null`)
	f.Add(`[{"name":"a:b:c@d/e"}]`)
	f.Fuzz(func(t *testing.T, raw string) {
		j := Job{Vars: map[string]string{"CI_JOB_SERVICES": raw}}
		list, err := j.Services()
		if err != nil {
			return
		}
		for _, s := range list {
			for _, a := range ServiceAliases(s) {
				if a == "" {
					t.Fatalf("empty alias for %+v", s)
				}
			}
		}
	})
}

// FuzzDockerAuthConfig: DOCKER_AUTH_CONFIG is a job variable.
func FuzzDockerAuthConfig(f *testing.F) {
	f.Add(`{"auths":{"r.example.com":{"auth":"dTpw"}}}`, "r.example.com/x")
	f.Add(`{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}`, "alpine")
	f.Fuzz(func(t *testing.T, raw, image string) {
		if strings.Contains(raw, "credsStore") || strings.Contains(raw, "credHelpers") {
			return // would run programs named by the input
		}
		_, _, _ = fromDockerAuthConfig(raw, image, t.TempDir())
	})
}
