package deps

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultContainerfiles returns the files looked for, in order: the first
// one present is the project's Containerfile.
func DefaultContainerfiles() []string { return []string{"Containerfile", "Dockerfile"} }

// maxFileSize bounds what is read from a dependency file: real ones are a
// few KiB, and a scan must not be made to swallow a huge blob.
const maxFileSize = 1 << 20

// CheckResult is what `depsd check` reports for one directory.
type CheckResult struct {
	Dir          string       `json:"dir"`
	File         string       `json:"file"` // the Containerfile used, empty if none
	Dependencies []Dependency `json:"dependencies"`
	Warnings     []Warning    `json:"warnings"`
	// Error is set when the directory could not be checked: a file that
	// cannot be built (with its line), or a directory that cannot be read.
	Error *FileError `json:"error,omitempty"`
}

// FileError says why a directory's dependencies could not be read.
type FileError struct {
	File    string `json:"file,omitempty"` // relative to the directory
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// CheckDir reads the dependency files of a local checkout: the first of
// containerfiles that exists, and .gitlab-deps. Image dependencies whose
// host equals registry get the repository path as their project.
//
// The result always names dir. When the directory cannot be checked the
// result's Error is set and the error is returned too: a *ParseError
// (with the path under dir) when a file cannot be built.
func CheckDir(dir string, containerfiles []string, registry string, opts Options) (CheckResult, error) {
	if len(containerfiles) == 0 {
		containerfiles = DefaultContainerfiles()
	}
	res := CheckResult{Dir: dir, Dependencies: []Dependency{}, Warnings: []Warning{}}
	fail := func(file string, line int, err error) (CheckResult, error) {
		res.Dependencies, res.Warnings = []Dependency{}, []Warning{}
		msg := err.Error()
		var perr *ParseError
		if errors.As(err, &perr) {
			msg = cleanErr(perr.Err)
			perr.File = filepath.Join(dir, file) // say which checkout
		}
		res.Error = &FileError{File: file, Line: line, Message: msg}
		return res, err
	}
	if fi, err := os.Stat(dir); err != nil {
		return fail("", 0, err)
	} else if !fi.IsDir() {
		return fail("", 0, fmt.Errorf("%s: not a directory", dir))
	}
	for _, name := range containerfiles {
		src, err := readDepFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fail(name, 0, err)
		}
		a, err := AnalyzeContainerfile(name, src, opts)
		var perr *ParseError
		res.File = name
		if errors.As(err, &perr) {
			return fail(name, perr.Line, err)
		}
		res.add(a)
		break
	}
	src, err := readDepFile(filepath.Join(dir, GitLabDepsFile))
	hasDeps := err == nil
	switch {
	case err == nil:
		res.add(ParseGitLabDeps(GitLabDepsFile, src, ""))
	case !errors.Is(err, fs.ErrNotExist):
		return fail(GitLabDepsFile, 0, err)
	}
	if res.File == "" {
		others := otherBuildFiles(dir, containerfiles)
		if !hasDeps || len(others) > 0 {
			msg := fmt.Sprintf("no %s here: nothing declares an upstream", strings.Join(containerfiles, " or "))
			if hasDeps {
				msg = fmt.Sprintf("no %s here", strings.Join(containerfiles, " or "))
			}
			if len(others) > 0 {
				msg += fmt.Sprintf("; %s present but not read (name it with --file, or containerfiles: in depsd.yaml)", strings.Join(others, ", "))
			}
			res.Warnings = append(res.Warnings, Warning{Message: msg})
		}
	}
	for i, d := range res.Dependencies {
		if d.Project == "" && d.Repository != "" {
			res.Dependencies[i].Project, _ = HostProject(d.Repository, registry)
		}
	}
	return res, nil
}

// otherBuildFiles lists the files of dir that look like Containerfiles
// (Dockerfile.prod, app.containerfile, ...) but are not among names.
func otherBuildFiles(dir string, names []string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		l := strings.ToLower(n)
		if e.IsDir() || !(strings.Contains(l, "dockerfile") || strings.Contains(l, "containerfile")) || strings.HasSuffix(l, ".dockerignore") || strings.HasSuffix(l, ".containerignore") {
			continue
		}
		listed := false
		for _, name := range names {
			if name == n {
				listed = true
			}
		}
		if !listed {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func (r *CheckResult) add(a FileAnalysis) {
	r.Dependencies = append(r.Dependencies, a.Dependencies...)
	r.Warnings = append(r.Warnings, a.Warnings...)
}

// readDepFile reads a dependency file, refusing directories and files too
// large to be one.
func readDepFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	if fi.Size() > maxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, larger than the %d a dependency file may have", path, fi.Size(), maxFileSize)
	}
	buf := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return buf, nil
}
