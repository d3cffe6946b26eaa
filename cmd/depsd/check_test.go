package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckJSON(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"Containerfile": "ARG BASE=registry.example.com/group/base\nFROM ${BASE}\nFROM debian:bookworm\n",
		"Dockerfile":    "FROM ignored:because-containerfile-wins\n",
		".gitlab-deps":  "group/tools\nnot a project\n",
	})
	var out, errOut bytes.Buffer
	code := run([]string{"check", "--registry", "registry.example.com", "--json", dir}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut.String())
	}
	var doc struct {
		Results []struct {
			Dir          string `json:"dir"`
			File         string `json:"file"`
			Dependencies []struct {
				Kind, Ref, Image, Repository, Project string
				Line                                  int
			} `json:"dependencies"`
			Warnings []struct {
				File    string
				Line    int
				Message string
			} `json:"warnings"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if len(doc.Results) != 1 {
		t.Fatalf("results: %+v", doc.Results)
	}
	r := doc.Results[0]
	if r.Dir != dir || r.File != "Containerfile" {
		t.Errorf("dir %q file %q", r.Dir, r.File)
	}
	want := []string{
		"from 2 ${BASE} registry.example.com/group/base:latest registry.example.com/group/base group/base",
		"from 3 debian:bookworm docker.io/library/debian:bookworm docker.io/library/debian ",
		"gitlab-deps 1 group/tools   group/tools",
	}
	var got []string
	for _, d := range r.Dependencies {
		got = append(got, strings.Join([]string{d.Kind, itoa(d.Line), d.Ref, d.Image, d.Repository, d.Project}, " "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("dependencies:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Warnings) != 1 || r.Warnings[0].File != ".gitlab-deps" || r.Warnings[0].Line != 2 {
		t.Errorf("warnings: %+v", r.Warnings)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestCheckExitCodes(t *testing.T) {
	good := writeFiles(t, map[string]string{"Dockerfile": "FROM alpine:3.20\nFROM ${NOPE}\n"})
	broken := writeFiles(t, map[string]string{"Containerfile": "FROM alpine\nRUN <<EOF\nnever closed\n"})
	empty := writeFiles(t, nil)
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "warnings are fine", args: []string{"check", good}, code: exitOK, stdout: "(unresolved)"},
		{name: "Dockerfile used when no Containerfile", args: []string{"check", good}, code: exitOK, stdout: "(Dockerfile)"},
		{name: "no dependency files", args: []string{"check", empty}, code: exitOK, stdout: "no dependencies"},
		{name: "unparseable file", args: []string{"check", good, broken}, code: exitFail, stderr: filepath.Join(broken, "Containerfile") + ":2: unterminated heredoc"},
		{name: "missing dir", args: []string{"check", filepath.Join(empty, "nope")}, code: exitFail, stderr: "no such file"},
		{name: "no dir", args: []string{"check"}, code: exitUsage, stderr: "no directory given"},
		{name: "bad flag", args: []string{"check", "--bogus", good}, code: exitUsage, stderr: "unknown flag: --bogus"},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, stderr: "unknown command"},
		{name: "no command", args: nil, code: exitUsage, stderr: "Usage:"},
		{name: "version", args: []string{"version"}, code: exitOK, stdout: "depsd "},
		{name: "custom file names", args: []string{"check", "--file", "Containerfile.prod", good}, code: exitOK, stdout: "no Containerfile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, &out, &errOut)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.code, errOut.String())
			}
			if !strings.Contains(out.String(), tt.stdout) {
				t.Errorf("stdout %q does not contain %q", out.String(), tt.stdout)
			}
			if !strings.Contains(errOut.String(), tt.stderr) {
				t.Errorf("stderr %q does not contain %q", errOut.String(), tt.stderr)
			}
		})
	}
}

// checkJSON runs depsd check --json and decodes its document.
func checkJSON(t *testing.T, args ...string) (int, checkDoc, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(append([]string{"check", "--json"}, args...), &out, &errOut)
	var doc checkDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s\nstderr: %s", err, out.String(), errOut.String())
	}
	return code, doc, errOut.String()
}

type checkDoc struct {
	Results []struct {
		Dir          string `json:"dir"`
		File         string `json:"file"`
		Dependencies []struct {
			Kind, Image, Repository string
			Line                    int
		} `json:"dependencies"`
		Warnings []struct {
			File    string
			Line    int
			Message string
		} `json:"warnings"`
		Error *struct {
			File    string `json:"file"`
			Line    int    `json:"line"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"results"`
}

// TestCheckFileThatCannotBeBuilt: a FROM without an image and an
// unterminated heredoc exit 1 naming file and line, on stderr and as the
// directory's result in --json, next to the good directory's result.
func TestCheckFileThatCannotBeBuilt(t *testing.T) {
	good := writeFiles(t, map[string]string{"Containerfile": "FROM alpine:3.20\n"})
	bareFrom := writeFiles(t, map[string]string{"Containerfile": "# base\nFROM\n"})
	heredoc := writeFiles(t, map[string]string{"Dockerfile": "FROM alpine\nRUN <<EOF\nnever closed\n"})
	var out, errOut bytes.Buffer
	if code := run([]string{"check", bareFrom}, &out, &errOut); code != exitFail {
		t.Errorf("bare FROM: exit %d, want %d; stdout %s", code, exitFail, out.String())
	}
	if want := filepath.Join(bareFrom, "Containerfile") + ":2: FROM requires"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q does not name %q", errOut.String(), want)
	}
	if !strings.Contains(out.String(), "error: Containerfile:2: FROM requires") {
		t.Errorf("stdout %q does not show the error", out.String())
	}

	code, doc, _ := checkJSON(t, good, bareFrom, heredoc)
	if code != exitFail {
		t.Errorf("exit %d, want %d", code, exitFail)
	}
	if len(doc.Results) != 3 {
		t.Fatalf("want a result per directory, got %+v", doc.Results)
	}
	if r := doc.Results[0]; r.Error != nil || len(r.Dependencies) != 1 {
		t.Errorf("good dir: %+v", r)
	}
	for i, want := range []struct {
		dir, file string
		line      int
		msg       string
	}{
		{bareFrom, "Containerfile", 2, "FROM requires either one or three arguments"},
		{heredoc, "Dockerfile", 2, "unterminated heredoc"},
	} {
		r := doc.Results[i+1]
		if r.Dir != want.dir || r.Error == nil || r.Error.File != want.file || r.Error.Line != want.line || !strings.Contains(r.Error.Message, want.msg) {
			t.Errorf("result %d: %+v, error %+v; want %+v", i+1, r, r.Error, want)
		}
	}
}

// TestCheckDirWithoutDependencyFile: such a directory has a result with a
// warning, naming a build file that is present but not in the list.
func TestCheckDirWithoutDependencyFile(t *testing.T) {
	empty := writeFiles(t, nil)
	prod := writeFiles(t, map[string]string{"Dockerfile.prod": "FROM alpine:3.20\n", "README": "x"})
	code, doc, _ := checkJSON(t, empty, prod)
	if code != exitOK || len(doc.Results) != 2 {
		t.Fatalf("exit %d, results %+v", code, doc.Results)
	}
	for i, want := range []string{"no Containerfile or Dockerfile here", "Dockerfile.prod present but not read"} {
		r := doc.Results[i]
		if r.File != "" || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0].Message, want) {
			t.Errorf("result %d: %+v; want a warning with %q", i, r, want)
		}
	}
	code, doc, _ = checkJSON(t, "--file", "Dockerfile.prod", prod)
	if code != exitOK || doc.Results[0].File != "Dockerfile.prod" || len(doc.Results[0].Warnings) != 0 {
		t.Errorf("--file Dockerfile.prod: exit %d, %+v", code, doc.Results)
	}
}

// TestCheckPlatform: --platform gives the platform ARGs their values; a
// list gives the union; a bad one is a usage error.
func TestCheckPlatform(t *testing.T) {
	dir := writeFiles(t, map[string]string{"Containerfile": "FROM scratch AS bin-amd64\n" +
		"FROM registry.example.com/tools/qemu:1 AS bin-arm64\n" +
		"FROM bin-${TARGETARCH}\n" +
		"FROM registry.example.com/base:${TARGETARCH}\n"})
	images := func(doc checkDoc) string {
		var s []string
		for _, d := range doc.Results[0].Dependencies {
			s = append(s, d.Image)
		}
		return strings.Join(s, " ")
	}
	for _, tt := range []struct{ platform, want string }{
		{"", "registry.example.com/tools/qemu:1 registry.example.com/base:amd64"},
		{"linux/arm64", "registry.example.com/tools/qemu:1 registry.example.com/base:arm64"},
		{"linux/amd64,linux/arm64", "registry.example.com/tools/qemu:1 registry.example.com/base:amd64 registry.example.com/base:arm64"},
	} {
		args := []string{dir}
		if tt.platform != "" {
			args = []string{"--platform", tt.platform, dir}
		}
		code, doc, stderr := checkJSON(t, args...)
		if code != exitOK || images(doc) != tt.want || len(doc.Results[0].Warnings) != 0 {
			t.Errorf("--platform %q: exit %d, images %q, warnings %+v, stderr %s; want %q", tt.platform, code, images(doc), doc.Results[0].Warnings, stderr, tt.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--platform", "amd64", dir}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "--platform") {
		t.Errorf("bad platform: exit %d, stderr %q", code, errOut.String())
	}
}

// TestCheckShowsPins: a dependency pinned by digest, directly or through
// an ARG default, is marked pinned with the tag it came from, in the
// table and in JSON; an unpinned one is not.
func TestCheckShowsPins(t *testing.T) {
	const pin = "sha256:1f38c0d0a1f2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"
	dir := writeFiles(t, map[string]string{
		"Containerfile": "ARG RUBY=registry.example.com/g/ruby:3@" + pin + "\nFROM ${RUBY} AS build\nFROM registry.example.com/g/base@" + pin + "\nFROM debian:bookworm\n",
	})
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--registry", "registry.example.com", dir}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut.String())
	}
	lines := strings.Split(out.String(), "\n")
	want := map[string]string{"g/ruby": "pinned sha256:1f38c0d0a1f2 (tag 3)", "g/base": "pinned sha256:1f38c0d0a1f2", "debian": "-"}
	for key, pinCol := range want {
		found := false
		for _, l := range lines {
			if strings.Contains(l, key) {
				found = true
				if !strings.HasSuffix(strings.TrimSpace(l), pinCol) {
					t.Errorf("line of %s %q does not end in %q", key, l, pinCol)
				}
			}
		}
		if !found {
			t.Errorf("no line for %s:\n%s", key, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"check", "--registry", "registry.example.com", "--json", dir}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Results []struct {
			Dependencies []struct {
				Project, Tag, Digest string
				Pinned               bool
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Results) != 1 {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, d := range doc.Results[0].Dependencies {
		if d.Pinned != (d.Digest == pin) || (d.Project == "g/ruby" && d.Tag != "3") {
			t.Errorf("dependency %+v", d)
		}
	}
}
