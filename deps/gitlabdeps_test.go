package deps

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseGitLabDeps(t *testing.T) {
	src := "\ufeff# upstreams of this project\r\n" +
		"group/base\r\n" +
		"   group/sub/ruby   \r\n" +
		"\r\n" +
		"https://gitlab.example.com/group/tools.git\n" +
		"https://gitlab.example.com/group/web/ # trailing comment\n" +
		"https://GitLab.Example.com/group/docs/-/tree/main\n" +
		"git@gitlab.example.com:group/ssh-style.git\n" +
		"https://other.example.org/group/elsewhere\n" +
		"not-a-path\n" +
		"group/base\n" +
		"two words/here\n" +
		"ftp://gitlab.example.com/group/x\n" +
		"https://gitlab.example.com/group/q?x=1\n" +
		"group/.hidden\n" +
		"group/project.git/sub\n"
	got := ParseGitLabDeps(".gitlab-deps", []byte(src), "gitlab.example.com")

	wantDeps := []struct {
		line    int
		project string
	}{
		{2, "group/base"}, {3, "group/sub/ruby"}, {5, "group/tools"}, {6, "group/web"},
		{7, "group/docs"}, {8, "group/ssh-style"},
	}
	if len(got.Dependencies) != len(wantDeps) {
		t.Fatalf("got %d dependencies, want %d: %+v", len(got.Dependencies), len(wantDeps), got.Dependencies)
	}
	for i, w := range wantDeps {
		d := got.Dependencies[i]
		if d.Line != w.line || d.Project != w.project || d.Kind != KindGitLabDeps {
			t.Errorf("dependency %d = %+v, want line %d project %s", i, d, w.line, w.project)
		}
	}
	wantWarn := map[int]string{
		9:  "another GitLab instance",
		10: "not a project path",
		11: "already listed on line 2",
		12: "one project per line",
		13: "unsupported URL scheme",
		14: "query or fragment",
		15: "not a project path",
		16: "not a project path",
	}
	if len(got.Warnings) != len(wantWarn) {
		t.Fatalf("got %d warnings, want %d: %+v", len(got.Warnings), len(wantWarn), got.Warnings)
	}
	for _, w := range got.Warnings {
		if !strings.Contains(w.Message, wantWarn[w.Line]) || w.File != ".gitlab-deps" {
			t.Errorf("warning %+v, want on line %d a message containing %q", w, w.Line, wantWarn[w.Line])
		}
	}
}

func TestParseGitLabDepsAnyHostWithoutInstance(t *testing.T) {
	got := ParseGitLabDeps(".gitlab-deps", []byte("https://other.example.org/g/p\n"), "")
	want := []Dependency{{Kind: KindGitLabDeps, Line: 1, Ref: "https://other.example.org/g/p", Project: "g/p"}}
	if !reflect.DeepEqual(got.Dependencies, want) || len(got.Warnings) != 0 {
		t.Fatalf("got %+v", got)
	}
}

func TestParseGitLabDepsEmpty(t *testing.T) {
	for _, src := range []string{"", "\n\n", "# nothing\n", "\ufeff"} {
		got := ParseGitLabDeps(".gitlab-deps", []byte(src), "")
		if len(got.Dependencies) != 0 || len(got.Warnings) != 0 {
			t.Errorf("%q: got %+v, want nothing", src, got)
		}
	}
}
