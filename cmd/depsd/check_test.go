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
		{name: "unparseable file", args: []string{"check", good, broken}, code: exitFail, stderr: filepath.Join(broken, "Containerfile") + ": unterminated heredoc"},
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
