package scan_test

import (
	"testing"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// TestAnalyzeReadsForTheConfiguredPlatform: the platform of the analysis
// options picks the upstream named with $TARGETARCH, and ENV lines that no
// dependency uses leave no warning on the project.
func TestAnalyzeReadsForTheConfiguredPlatform(t *testing.T) {
	projects := func() []scan.Project {
		return []scan.Project{
			{Path: "infra/base-amd64", RegistryPrefix: "registry.example.com/infra/base-amd64"},
			{Path: "infra/base-arm64", RegistryPrefix: "registry.example.com/infra/base-arm64"},
			{Path: "apps/app", RegistryPrefix: "registry.example.com/apps/app", Files: []scan.File{{
				Name: "Containerfile",
				Content: []byte("FROM scratch AS bin-linux\nFROM bin-$TARGETOS AS bin\n" +
					"FROM registry.example.com/infra/base-${TARGETARCH}:1\nENV PATH=/app:$PATH GOFLAGS=\"\"\n"),
			}}},
		}
	}
	for _, tt := range []struct{ platform, want string }{
		{"", "infra/base-amd64"},
		{"linux/arm64", "infra/base-arm64"},
	} {
		var opts deps.Options
		if tt.platform != "" {
			p, err := deps.ParsePlatforms(tt.platform)
			if err != nil {
				t.Fatal(err)
			}
			opts.Platforms = p
		}
		ps := projects()
		scan.Analyze(ps, scan.AnalyzeOptions{InstanceHost: "gitlab.example.com", Analysis: opts})
		app := ps[2]
		if len(app.Dependencies) != 1 || app.Dependencies[0].Project != tt.want || len(app.Warnings) != 0 {
			t.Errorf("platform %q: dependencies %+v, warnings %+v; want one on %s and no warning", tt.platform, app.Dependencies, app.Warnings, tt.want)
		}
	}
}
