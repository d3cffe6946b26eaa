package deps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzAnalyzeContainerfile: any input is analysed without panicking, and
// what comes out is consistent: lines inside the file, normalised images
// whose repository prefixes the image.
func FuzzAnalyzeContainerfile(f *testing.F) {
	files, _ := filepath.Glob("testdata/containerfiles/*.Containerfile")
	more, _ := filepath.Glob("testdata/buildkit/*.Dockerfile")
	files = append(files, more...)
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	platforms, err := ParsePlatforms("linux/amd64,linux/arm/v7")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		a, err := AnalyzeContainerfile("Containerfile", src, Options{Platforms: platforms})
		if err != nil {
			if len(a.Dependencies) != 0 {
				t.Fatalf("error %v with dependencies %+v", err, a.Dependencies)
			}
			return
		}
		lines := strings.Count(string(src), "\n") + 1
		for _, d := range a.Dependencies {
			if strings.ContainsRune(d.Image+d.Repository, markOpen) {
				t.Fatalf("a marker leaked into %+v", d)
			}
			if d.Line < 1 || d.Line > lines {
				t.Fatalf("dependency on line %d of a %d-line file: %+v", d.Line, lines, d)
			}
			if d.Image != "" && !strings.HasPrefix(d.Image, d.Repository+":") && !strings.HasPrefix(d.Image, d.Repository+"@") {
				t.Fatalf("image %q does not start with its repository %q", d.Image, d.Repository)
			}
			if d.Image != "" {
				again, err := NormalizeImage(d.Image)
				if err != nil || again.Image != d.Image {
					t.Fatalf("normalising %q again gave %+v, %v", d.Image, again, err)
				}
			}
		}
		for _, w := range a.Warnings {
			if w.Line < 0 || w.Line > lines || w.Message == "" {
				t.Fatalf("bad warning %+v", w)
			}
		}
	})
}

// FuzzParseGitLabDeps: every accepted line is a valid project path, and
// every non-blank, non-comment line is either accepted or warned about.
func FuzzParseGitLabDeps(f *testing.F) {
	for _, s := range []string{
		"group/base\n# c\nhttps://gitlab.example.com/g/p.git\n",
		"git@gitlab.example.com:g/p.git\r\n\r\n",
		"\ufeffg/p # comment\nhttps://gitlab.example.com/g/p/-/tree/main\n",
		"https://h/g/p?x#y\nftp://h/g/p\n g/p \n",
	} {
		f.Add(s, "gitlab.example.com")
	}
	f.Fuzz(func(t *testing.T, src, host string) {
		a := ParseGitLabDeps(".gitlab-deps", []byte(src), host)
		for _, d := range a.Dependencies {
			if !projectPathPattern.MatchString(d.Project) || d.Kind != KindGitLabDeps {
				t.Fatalf("accepted %+v", d)
			}
		}
		entries := 0
		for _, line := range strings.Split(strings.TrimPrefix(src, "\ufeff"), "\n") {
			if stripComment(strings.TrimSpace(strings.TrimSuffix(line, "\r"))) != "" {
				entries++
			}
		}
		if got := len(a.Dependencies) + len(a.Warnings); got != entries {
			t.Fatalf("%d entries, but %d dependencies + %d warnings", entries, len(a.Dependencies), len(a.Warnings))
		}
	})
}

// FuzzRegistryMap: the map agrees with a brute-force longest-prefix search.
func FuzzRegistryMap(f *testing.F) {
	f.Add("registry.example.com/group/project", "registry.example.com/group", "registry.example.com/group/project/sub/x")
	f.Add("r/a/b", "R/A", "r/a/bc")
	f.Add("h:5000/a", "h/a", "H:5000/A/b/c/d/e/f")
	f.Fuzz(func(t *testing.T, p1, p2, repo string) {
		prefixes := map[string]string{p1: "one", p2: "two"}
		m := NewRegistryMap(prefixes)
		got, ok := m.Project(repo)
		want, wantOK := "", false
		best := -1
		r := strings.ToLower(strings.Trim(repo, "/"))
		for p, proj := range prefixes {
			k := strings.ToLower(strings.Trim(p, "/"))
			if k == "" {
				continue
			}
			if (r == k || strings.HasPrefix(r, k+"/")) && len(k) > best {
				best, want, wantOK = len(k), proj, true
			}
		}
		if strings.ToLower(strings.Trim(p1, "/")) == strings.ToLower(strings.Trim(p2, "/")) {
			return // both map the same key; either answer is right
		}
		if got != want || ok != wantOK {
			t.Fatalf("Project(%q) with %q = %q,%v; brute force says %q,%v", repo, prefixes, got, ok, want, wantOK)
		}
	})
}

// FuzzMovePins: moving the pins of any file either is refused or changes
// nothing but digests, in place: every byte outside a replaced digest is
// the file's own, and every pin of the moved repository is on the new
// digest.
func FuzzMovePins(f *testing.F) {
	f.Add([]byte("FROM registry.example.com/acme/ruby:3@" + oldRuby + "\n"))
	f.Add([]byte("ARG RUBY=registry.example.com/acme/ruby@" + oldRuby + "\r\n# " + oldRuby + "\r\nFROM ${RUBY}\r\n"))
	f.Add([]byte("ARG D=" + oldRuby + "\nFROM registry.example.com/acme/ruby@${D}\nFROM mirror.example.com/acme/ruby@" + oldRuby + "\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		got, moved, err := MovePins("Containerfile", src, []PinMove{{Repository: ruby, To: newRuby}}, Options{})
		if err != nil {
			return
		}
		if len(moved) == 0 && string(got) != string(src) {
			t.Fatalf("nothing moved, yet the file changed:\n%q\n%q", src, got)
		}
		// Same length digests: the files align byte for byte, and each
		// difference lies inside a new digest.
		if len(got) != len(src) {
			t.Fatalf("length %d, then %d", len(src), len(got))
		}
		for i := 0; i < len(src); i++ {
			if src[i] == got[i] {
				continue
			}
			j := strings.LastIndex(string(got[:i+1]), newRuby[:7])
			if j < 0 || j+len(newRuby) <= i || string(got[j:j+len(newRuby)]) != newRuby {
				t.Fatalf("byte %d changed outside a new digest:\n%q\n%q", i, src, got)
			}
		}
		a, err := AnalyzeContainerfile("Containerfile", got, Options{})
		if err != nil {
			t.Fatalf("the result does not parse: %v", err)
		}
		for _, d := range a.Dependencies {
			if d.Repository == ruby && d.Pinned && d.Digest != newRuby {
				t.Fatalf("pin of %s left at %s", ruby, d.Digest)
			}
		}
	})
}
