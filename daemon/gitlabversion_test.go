package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// At start the daemon reads GitLab's version, logs it, and warns of each
// feature depsd uses that the GitLab lacks.
func TestDaemonReadsGitLabVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version     string
		wantWarning string // a feature named in a warning; "" for none
	}{
		{"17.10.0", ""},
		{"18.1.0-ee", ""},
		{"17.9.3", "pipeline inputs"},
		{"16.11.0", "pipeline variables settings"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			srv := testGitLab(t, gitlabtest.Options{Version: tc.version}, map[string]string{"g/app": "FROM debian\n"})
			var logs bytes.Buffer
			d, err := New(context.Background(), Options{Config: testConfig(t, srv), Listen: "127.0.0.1:0",
				GitLab: testClient(t, srv), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.store.Close() })
			if _, ok := d.GitLabVersion(); ok {
				t.Fatal("version known before it was read")
			}
			d.readGitLabVersion(context.Background())
			if v, ok := d.GitLabVersion(); !ok || v.Version != tc.version {
				t.Errorf("GitLabVersion = %+v, %v", v, ok)
			}
			out := logs.String()
			if !strings.Contains(out, "msg=\"GitLab version\" replica=") || !strings.Contains(out, "version="+tc.version) {
				t.Errorf("log lacks the version:\n%s", out)
			}
			warned := strings.Contains(out, "GitLab lacks a feature")
			if warned != (tc.wantWarning != "") || (warned && !strings.Contains(out, tc.wantWarning)) {
				t.Errorf("want warning %q:\n%s", tc.wantWarning, out)
			}
		})
	}
}
