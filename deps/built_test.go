package deps

import (
	"slices"
	"testing"
)

// Built names what the built image's layers start with: the last stage's
// base, followed through the stages it is FROM.
func TestBuilt(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		platforms []Platform
		want      []string
	}{
		{"one stage", "FROM registry.example.com/base/ruby:3\nRUN true\n", nil,
			[]string{"registry.example.com/base/ruby:3"}},
		{"builder stage is not the base", "FROM golang:1.22 AS build\nRUN go build\nFROM registry.example.com/base/debian:12\nCOPY --from=build /app /app\n", nil,
			[]string{"registry.example.com/base/debian:12"}},
		{"through a stage", "FROM registry.example.com/base/ruby:3 AS base\nRUN gem install\nFROM base\nCOPY . .\n", nil,
			[]string{"registry.example.com/base/ruby:3"}},
		{"FROM scratch", "FROM golang:1.22 AS build\nFROM scratch\nCOPY --from=build /app /app\n", nil, nil},
		{"unresolved", "FROM registry.example.com/base/${NOPE}\n", nil, nil},
		{"per platform", "FROM registry.example.com/base/ruby-$TARGETARCH:3\n",
			[]Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}},
			[]string{"registry.example.com/base/ruby-amd64:3", "registry.example.com/base/ruby-arm64:3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := AnalyzeContainerfile("Containerfile", []byte(tc.src), Options{Platforms: tc.platforms})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.Built, tc.want) {
				t.Errorf("Built = %q, want %q", a.Built, tc.want)
			}
		})
	}
}
