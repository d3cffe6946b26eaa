package daemon

import (
	"context"
	"path/filepath"
	"testing"

	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/store/storetest"
)

// The liveness and leader tests run on the backend storetest selects
// (DEPSD_TEST_STORE); the daemon's own end-to-end tests use SQLite files.
func TestMain(m *testing.M) { storetest.Main(m) }

// testToken is the fake GitLab's token in the daemon's tests.
const testToken = "t"

// testGitLab starts a fake GitLab (opts.Token is set) with one project of
// group g per entry, path → Containerfile, stopped when the test ends.
func testGitLab(t *testing.T, opts gitlabtest.Options, containerfiles map[string]string) *gitlabtest.Server {
	t.Helper()
	opts.Token = testToken
	srv := gitlabtest.New(opts)
	t.Cleanup(srv.Close)
	for path, cf := range containerfiles {
		if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"Containerfile": cf}}); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}

// testClient is a client of srv without a rate limit.
func testClient(t *testing.T, srv *gitlabtest.Server) *gitlab.Client {
	t.Helper()
	gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: testToken, RequestsPerMinute: -1})
	if err != nil {
		t.Fatal(err)
	}
	return gl
}

// testConfig is a daemon's configuration over srv: group g, a fresh state
// file, a webhook secret, no image verification, defaults otherwise.
func testConfig(t *testing.T, srv *gitlabtest.Server) config.Config {
	t.Helper()
	cfg := config.Defaults()
	cfg.GitLab.URL, cfg.GitLab.Token = srv.URL, testToken
	cfg.Scope.Groups = []string{"g"}
	cfg.State = filepath.Join(t.TempDir(), "depsd.db")
	cfg.Hooks.Secret = "s"
	// The fake GitLab's projects publish images on its registry host
	// (registry.example.com unless a test gives a real one): verifying
	// them would look that name up. Tests of verification turn it on.
	cfg.Images.Verify = config.VerifyOff
	return cfg
}

// runDaemon starts a daemon with opts (on 127.0.0.1 at a free port unless
// opts.Listen says otherwise) and stops it when the test ends, where its
// run must end without an error. The context is the daemon's.
func runDaemon(t *testing.T, opts Options) (*Daemon, context.Context) {
	t.Helper()
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return d, ctx
}
