package gitlab

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

var (
	signingToken    = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	newSigningToken = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
)

// hooks sync installs the signing token, repairs a hook that lacks one,
// re-sends it on --rotate-token, and on a GitLab that ignores it reports
// the hooks as unsigned without an error and without editing them again.
func TestSyncHooksSigningToken(t *testing.T) {
	tests := []struct {
		name    string
		signing gitlabtest.WebhookSigning
		// After the first sync: the hooks' actions by project, whether
		// GitLab keeps the token, whether the report says unsigned.
		first        map[string]HookAction
		stored       string
		unsigned     int
		secondChange int
	}{
		{"19.0", gitlabtest.SigningSupported,
			map[string]HookAction{"g/new": HookCreated, "g/unsigned": HookUpdated, "g/signed": HookUnchanged},
			signingToken, 0, 0},
		{"19.x, flag off", gitlabtest.SigningFlagOff,
			// The first write (g/new's create: projects in path order)
			// shows GitLab ignores the token, before any other project is
			// planned: g/unsigned and g/signed (which has no token either:
			// GitLab kept none) are not edited for it.
			map[string]HookAction{"g/new": HookCreated, "g/unsigned": HookUnchanged, "g/signed": HookUnchanged}, "", 3, 0},
		{"before 19.0", gitlabtest.SigningUnsupported,
			map[string]HookAction{"g/new": HookCreated, "g/unsigned": HookUnchanged, "g/signed": HookUnchanged},
			"", 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t, gitlabtest.Options{})
			srv.SetWebhookSigning(gitlabtest.SigningSupported) // the hooks set up by hand below
			base := gitlabtest.Hook{URL: hookURL, Token: "s3cret", Events: wantEvents, EnableSSLVerification: true}
			signed := base
			if tt.signing == gitlabtest.SigningSupported {
				signed.SigningToken = signingToken // a GitLab that ignores it never kept one
			}
			for path, hooks := range map[string][]gitlabtest.Hook{"g/new": nil, "g/unsigned": {base}, "g/signed": {signed}} {
				must(srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"a": "b"}}))
				for _, h := range hooks {
					must(srv.AddHook(path, h))
				}
			}
			srv.SetWebhookSigning(tt.signing)
			c, _ := newClient(t, srv, nil)
			ctx := context.Background()
			projects := must(c.ListProjects(ctx, Scope{Groups: []string{"g"}}))
			spec := HookSpec{URL: hookURL, SecretToken: "s3cret", SigningToken: signingToken}
			rep, err := c.SyncHooks(ctx, projects, spec, false)
			if err != nil {
				t.Fatalf("an ignored signing token is an error: %v", err)
			}
			for _, ch := range rep.Changes {
				if want, ok := tt.first[ch.Project]; ok && ch.Action != want {
					t.Errorf("%s: %s %v, want %s", ch.Project, ch.Action, ch.Reasons, want)
				}
				if strings.Contains(strings.Join(ch.Reasons, " "), strings.TrimPrefix(signingToken, "whsec_")) {
					t.Fatalf("a reason shows the token: %v", ch.Reasons)
				}
			}
			for _, p := range projects {
				if got := srv.Hooks(p.Path)[0].SigningToken; got != tt.stored {
					t.Errorf("%s: GitLab keeps signing token %q, want %q", p.Path, got, tt.stored)
				}
			}
			if rep.Unsigned() != tt.unsigned || (tt.unsigned > 0) != strings.Contains(rep.UnsignedNote(), "X-Gitlab-Token") {
				t.Errorf("unsigned %d, note %q; want %d", rep.Unsigned(), rep.UnsignedNote(), tt.unsigned)
			}
			if len(rep.Changes) != 3 {
				t.Errorf("%d changes, want one per project: %+v", len(rep.Changes), rep.Changes)
			}
			// Only the hooks updated were edited: none for a token
			// GitLab ignores.
			if edits := srv.Requests("PUT /projects/:id/hooks/:hook_id"); edits != int64(rep.Count(HookUpdated)) {
				t.Errorf("%d hook edits, want %d", edits, rep.Count(HookUpdated))
			}
			// Idempotent, also where GitLab ignores the token: the same
			// client (serve's) edits nothing again.
			again, err := c.SyncHooks(ctx, projects, spec, false)
			if err != nil || again.Changed() != tt.secondChange || again.Unsigned() != tt.unsigned {
				t.Fatalf("second sync: changed %d, unsigned %d, %v: %+v", again.Changed(), again.Unsigned(), err, again.Changes)
			}
		})
	}
}

// Rotation: GitLab never returns a signing token, so a new one is only
// installed on --rotate-token (RotateToken), on every depsd hook.
func TestSyncHooksRotatesSigningToken(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	for _, p := range []string{"g/a", "g/b"} {
		must(srv.AddProject(gitlabtest.Project{Path: p, Files: map[string]string{"a": "b"}}))
	}
	c, _ := newClient(t, srv, nil)
	ctx := context.Background()
	projects := must(c.ListProjects(ctx, Scope{Groups: []string{"g"}}))
	spec := HookSpec{URL: hookURL, SecretToken: "s3cret", SigningToken: signingToken}
	if _, err := c.SyncHooks(ctx, projects, spec, false); err != nil {
		t.Fatal(err)
	}
	spec.SigningToken = newSigningToken
	if rep, err := c.SyncHooks(ctx, projects, spec, false); err != nil || rep.Changed() != 0 {
		t.Fatalf("a changed token cannot be seen, so nothing changes without RotateToken: %+v %v", rep, err)
	}
	spec.RotateToken = true
	rep, err := c.SyncHooks(ctx, projects, spec, false)
	if err != nil || rep.Count(HookUpdated) != 2 {
		t.Fatalf("rotate: %+v %v", rep, err)
	}
	for _, p := range []string{"g/a", "g/b"} {
		if h := srv.Hooks(p); len(h) != 1 || h[0].SigningToken != newSigningToken || !slices.Contains(rep.Changes[0].Reasons, "token rotation requested") {
			t.Fatalf("%s: %+v", p, h)
		}
	}
}

// Neither the signing token nor the secret shows in hooks sync's logs (at
// debug level) or errors, also when GitLab refuses the token.
func TestSyncHooksKeepsTokensOutOfLogsAndErrors(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	must(srv.AddProject(gitlabtest.Project{Path: "g/a", Files: map[string]string{"a": "b"}}))
	var logs bytes.Buffer
	c, _ := newClient(t, srv, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx := context.Background()
	projects := must(c.ListProjects(ctx, Scope{Groups: []string{"g"}}))
	// GitLab takes only 32-byte keys: this one is refused with a 400.
	refused := "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 24))
	_, err := c.SyncHooks(ctx, projects, HookSpec{URL: hookURL, SecretToken: "s3cret-value", SigningToken: refused}, false)
	if err == nil || !strings.Contains(err.Error(), "signing_token") {
		t.Fatalf("error %v, want GitLab's refusal of signing_token", err)
	}
	if _, err := c.SyncHooks(ctx, projects, HookSpec{URL: hookURL, SecretToken: "s3cret-value", SigningToken: signingToken, RotateToken: true}, false); err != nil {
		t.Fatal(err)
	}
	out := logs.String() + err.Error()
	if !strings.Contains(logs.String(), "hook synced") {
		t.Fatalf("test setup: nothing logged: %s", out)
	}
	for _, secret := range []string{refused[6:], signingToken[6:], "s3cret-value"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q shows in the logs or the error:\n%s", secret, out)
		}
	}
}
