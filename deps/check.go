package deps

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
}

// CheckDir reads the dependency files of a local checkout: the first of
// containerfiles that exists, and .gitlab-deps. Image dependencies whose
// host equals registry get the repository path as their project. The error
// is a *ParseError when a file exists but cannot be analysed at all.
func CheckDir(dir string, containerfiles []string, registry string) (CheckResult, error) {
	if len(containerfiles) == 0 {
		containerfiles = DefaultContainerfiles()
	}
	res := CheckResult{Dir: dir, Dependencies: []Dependency{}, Warnings: []Warning{}}
	if fi, err := os.Stat(dir); err != nil {
		return res, err
	} else if !fi.IsDir() {
		return res, fmt.Errorf("%s: not a directory", dir)
	}
	for _, name := range containerfiles {
		src, err := readDepFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return res, err
		}
		a, err := AnalyzeContainerfile(name, src)
		var perr *ParseError
		if errors.As(err, &perr) {
			perr.File = filepath.Join(dir, name) // say which checkout
			return res, perr
		}
		res.File = name
		res.add(a)
		break
	}
	src, err := readDepFile(filepath.Join(dir, GitLabDepsFile))
	switch {
	case err == nil:
		res.add(ParseGitLabDeps(GitLabDepsFile, src, ""))
	case !errors.Is(err, fs.ErrNotExist):
		return res, err
	}
	for i, d := range res.Dependencies {
		if d.Project == "" && d.Repository != "" {
			res.Dependencies[i].Project, _ = HostProject(d.Repository, registry)
		}
	}
	return res, nil
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
