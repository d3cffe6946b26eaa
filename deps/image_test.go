package deps

import "testing"

func TestNormalizeImage(t *testing.T) {
	tests := []struct {
		ref                    string
		image, repo, tag, dgst string
		wantErr                bool
	}{
		{ref: "debian", image: "docker.io/library/debian:latest", repo: "docker.io/library/debian", tag: "latest"},
		{ref: "library/debian:12", image: "docker.io/library/debian:12", repo: "docker.io/library/debian", tag: "12"},
		{ref: "docker.io/debian", image: "docker.io/library/debian:latest", repo: "docker.io/library/debian", tag: "latest"},
		{ref: "index.docker.io/library/debian:12", image: "docker.io/library/debian:12", repo: "docker.io/library/debian", tag: "12"},
		{ref: "localhost:5000/a/b", image: "localhost:5000/a/b:latest", repo: "localhost:5000/a/b", tag: "latest"},
		{ref: "Registry.Example.com/g/p:v1", image: "registry.example.com/g/p:v1", repo: "registry.example.com/g/p", tag: "v1"},
		{ref: "r.example.com/g/p@sha256:" + hex64, image: "r.example.com/g/p@sha256:" + hex64, repo: "r.example.com/g/p", dgst: "sha256:" + hex64},
		{ref: "r.example.com/g/p:1@sha256:" + hex64, image: "r.example.com/g/p:1@sha256:" + hex64, repo: "r.example.com/g/p", tag: "1", dgst: "sha256:" + hex64},
		{ref: "Debian", wantErr: true},
		{ref: "", wantErr: true},
		{ref: "r.example.com/g/p@sha256:short", wantErr: true},
		{ref: "a b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := NormalizeImage(tt.ref)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got.Image != tt.image || got.Repository != tt.repo || got.Tag != tt.tag || got.Digest != tt.dgst {
				t.Errorf("got %+v", got)
			}
		})
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestRegistryMap(t *testing.T) {
	m := NewRegistryMap(map[string]string{
		"registry.example.com/group/project":     "group/project",
		"registry.example.com/group/project-two": "group/Project-Two",
		"registry.example.com/group/sub/deep":    "group/sub/deep",
		"registry.example.com/group":             "group", // a project named like its group's path prefix
		"registry.example.com:5050/other/p":      "other/p",
		"":                                       "no/registry",
	})
	tests := []struct {
		repo, want string
		ok         bool
	}{
		{"registry.example.com/group/project", "group/project", true},
		{"registry.example.com/group/project/sub", "group/project", true},
		{"registry.example.com/group/project/sub/deeper/still", "group/project", true},
		{"REGISTRY.example.COM/group/project", "group/project", true},
		{"registry.example.com/group/project-two/x", "group/Project-Two", true},
		{"registry.example.com/group/projectx", "group", true}, // not group/project: prefixes end at a '/'
		{"registry.example.com/group/sub/deep/img", "group/sub/deep", true},
		{"registry.example.com/group/sub/other", "group", true},
		{"registry.example.com:5050/other/p/img", "other/p", true},
		{"registry.example.com/other/p", "", false},
		{"docker.io/library/debian", "", false},
		{"registry.example.com", "", false},
	}
	for _, tt := range tests {
		got, ok := m.Project(tt.repo)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Project(%q) = %q, %v; want %q, %v", tt.repo, got, ok, tt.want, tt.ok)
		}
	}
}

func TestHostProject(t *testing.T) {
	if p, ok := HostProject("registry.example.com/group/base", "Registry.Example.com"); !ok || p != "group/base" {
		t.Errorf("got %q %v", p, ok)
	}
	if _, ok := HostProject("docker.io/library/debian", "registry.example.com"); ok {
		t.Error("docker.io image mapped to a project")
	}
	if _, ok := HostProject("registry.example.com/group/base", ""); ok {
		t.Error("mapped without a registry")
	}
}
