package scan

import (
	"testing"

	"gitlab.com/depsd/depsd/deps"
)

// TestAnalysisCacheKeysOnAllItDependsOn: a file is parsed once for the
// same name, content, host and platforms; any of them different is
// another analysis; and what a caller does to the slices it got does not
// reach the next caller.
func TestAnalysisCacheKeysOnAllItDependsOn(t *testing.T) {
	c := analysisCache{max: 100}
	parses := 0
	get := func(f File, host string, opts deps.Options) deps.FileAnalysis {
		return c.get(f, host, opts, func() deps.FileAnalysis {
			parses++
			return parseFile(f, host, opts)
		})
	}
	f := File{Name: "Containerfile", Content: []byte("FROM registry.example.com/g/base:1\n")}
	arm := deps.Options{Platforms: []deps.Platform{{OS: "linux", Architecture: "arm64"}}}
	first := get(f, "gitlab.example.com", deps.Options{})
	if len(first.Dependencies) != 1 || first.Dependencies[0].Ref != "registry.example.com/g/base:1" {
		t.Fatalf("analysis = %+v, want base:1", first)
	}
	first.Dependencies[0].Ref = "changed by a caller"
	first.Built = append(first.Built[:0], "changed")
	again := get(f, "gitlab.example.com", deps.Options{})
	if parses != 1 {
		t.Errorf("the same file parsed %d times, want once", parses)
	}
	if again.Dependencies[0].Ref != "registry.example.com/g/base:1" || again.Built[0] == "changed" {
		t.Errorf("a caller's change reached the cache: %+v", again)
	}
	for name, other := range map[string]func() deps.FileAnalysis{
		"content": func() deps.FileAnalysis {
			return get(File{Name: f.Name, Content: []byte("FROM registry.example.com/g/base:2\n")}, "gitlab.example.com", deps.Options{})
		},
		"name": func() deps.FileAnalysis {
			return get(File{Name: "Dockerfile", Content: f.Content}, "gitlab.example.com", deps.Options{})
		},
		"host":      func() deps.FileAnalysis { return get(f, "other.example.com", deps.Options{}) },
		"platforms": func() deps.FileAnalysis { return get(f, "gitlab.example.com", arm) },
	} {
		before := parses
		other()
		if parses != before+1 {
			t.Errorf("another %s: parsed %d times, want once more (a different key)", name, parses-before)
		}
	}
	if got := get(File{Name: f.Name, Content: []byte("FROM registry.example.com/g/base:2\n")}, "gitlab.example.com", deps.Options{}); got.Dependencies[0].Ref != "registry.example.com/g/base:2" {
		t.Errorf("another content: %+v, want base:2", got)
	}
}

// TestAnalysisCacheIsBounded: full, the cache starts over, and keeps
// what came after.
func TestAnalysisCacheIsBounded(t *testing.T) {
	c := analysisCache{max: 3}
	parses := 0
	get := func(i int) {
		f := File{Name: "Containerfile", Content: []byte{byte('a' + i)}}
		c.get(f, "", deps.Options{}, func() deps.FileAnalysis { parses++; return deps.FileAnalysis{} })
	}
	for i := range 10 {
		get(i)
		if len(c.entries) == 0 || len(c.entries) > c.max {
			t.Fatalf("%d entries after %d files, bound %d", len(c.entries), i+1, c.max)
		}
	}
	before := parses
	get(9) // the last one is still kept
	if parses != before {
		t.Errorf("the newest file parsed again: the cache kept nothing")
	}
}
