package scan_test

import (
	"context"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
)

func TestDeclaresActionIDInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ci string
		want     bool
	}{
		{"the snippet", "spec:\n  inputs:\n    depsd_action_id:\n      default: ''\n---\nbuild:\n  script: make\n", true},
		{"among other inputs", "spec:\n  inputs:\n    stage:\n      default: test\n    depsd_action_id:\n      default: ''\n---\nbuild:\n  script: make\n", true},
		{"no --- separator: not a header", "spec:\n  inputs:\n    depsd_action_id:\n      default: ''\nbuild:\n  script: make\n", false},
		{"other inputs only", "spec:\n  inputs:\n    stage:\n---\nbuild:\n  script: make\n", false},
		{"no header", "build:\n  script: make\n", false},
		{"not YAML", "spec: [\n---\n", false},
		{"empty", "", false},
	} {
		if got := scan.DeclaresActionIDInput([]byte(tc.ci)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// The scan stores what the engine reads back.
	for got, want := range map[string]chain.PipelineIdent{
		scan.IdentVariables: chain.IdentVariables, scan.IdentInputs: chain.IdentInputs, scan.IdentNone: chain.IdentNone,
	} {
		if got != string(want) {
			t.Errorf("scan ident %q, chain ident %q", got, want)
		}
	}
	if scan.ActionIDInput != chain.InputActionID {
		t.Errorf("input names differ: %q, %q", scan.ActionIDInput, chain.InputActionID)
	}
}

// A scan learns how each project identifies pipelines from the settings
// GitLab shows the token (Maintainer and up) and, where variables are
// refused, from the CI configuration; a project whose settings are hidden
// keeps what the engine learned until it changes, and is re-checked then.
func TestScanLearnsPipelineIdent(t *testing.T) {
	t.Parallel()
	const snippet = "spec:\n  inputs:\n    depsd_action_id:\n      default: ''\n---\nbuild:\n  script: make\n"
	cf := "FROM debian\n"
	c := newClocked(t,
		gitlabtest.Project{Path: "g/open", Files: map[string]string{"Containerfile": cf, ".gitlab-ci.yml": "build:\n  script: make\n"},
			CI: gitlabtest.CISettings{TokenRole: gitlabtest.RoleMaintainer}},
		gitlabtest.Project{Path: "g/refusing", Files: map[string]string{"Containerfile": cf},
			CI: gitlabtest.RestrictedCISettings(gitlabtest.RoleMaintainer)},
		gitlabtest.Project{Path: "g/inputs", Files: map[string]string{"Containerfile": cf, ".gitlab-ci.yml": snippet},
			CI: gitlabtest.RestrictedCISettings(gitlabtest.RoleMaintainer)},
		gitlabtest.Project{Path: "g/hidden", Files: map[string]string{"Containerfile": cf},
			CI: gitlabtest.RestrictedCISettings(gitlabtest.RoleDeveloper)},
	)
	ctx := context.Background()
	idents := func() map[string]string {
		t.Helper()
		ps, err := c.st.Projects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, p := range ps {
			out[p.Path] = p.PipelineIdent
		}
		return out
	}
	res, err := scan.Run(ctx, c.gl, c.st, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"g/open": "variables", "g/refusing": "none", "g/inputs": "inputs", "g/hidden": ""}
	if got := idents(); !equal(got, want) {
		t.Errorf("after the first scan: %v, want %v", got, want)
	}
	// CI configurations are read only where variables are refused: not
	// g/open's.
	if res.BlobsRead != 1+1 {
		t.Errorf("%d blobs read, want 2 (the Containerfile they share, g/inputs' CI configuration)", res.BlobsRead)
	}

	// The engine learned that g/hidden refuses variables (no input):
	// scans keep it while the project is unchanged...
	err = c.st.UpdateChains(ctx, func(tx chain.Tx) error {
		p, _, err := tx.Project(ctx, "g/hidden")
		if err != nil {
			return err
		}
		return tx.SetPipelineIdent(ctx, p.ID, chain.IdentNone)
	})
	if err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(time.Minute)
	if _, err := scan.Run(ctx, c.gl, c.st, c.opts); err != nil {
		t.Fatal(err)
	}
	want["g/hidden"] = "none"
	if got := idents(); !equal(got, want) {
		t.Errorf("unchanged rescan: %v, want %v", got, want)
	}
	// ...and re-check it once the project adds the input: inputs. An
	// admin allowing variables on g/refusing shows on the next scan.
	if _, err := c.srv.SetFile("g/hidden", ".gitlab-ci.yml", snippet); err != nil {
		t.Fatal(err)
	}
	if err := c.srv.SetCISettings("g/refusing", gitlabtest.CISettings{TokenRole: gitlabtest.RoleMaintainer}); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(2 * time.Hour) // past GitLab's hourly last_activity_at
	if _, err := scan.Run(ctx, c.gl, c.st, c.opts); err != nil {
		t.Fatal(err)
	}
	want["g/hidden"], want["g/refusing"] = "inputs", "variables"
	if got := idents(); !equal(got, want) {
		t.Errorf("after the changes: %v, want %v", got, want)
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
