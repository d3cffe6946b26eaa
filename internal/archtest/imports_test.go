package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "gitlab.com/depsd/depsd/"

// allowed is ARCHITECTURE.md's table: what each listed package may import
// from depsd (production files only). Packages not listed are held to the
// general rules in TestImportRules only, so a new package does not break
// this test before it is added here.
var allowed = map[string][]string{
	"deps":              {},
	"buildinfo":         {},
	"gitlab/gitlabtest": {},
	"templates":         {},
	"gitlab":            {"buildinfo"},
	"chain":             {"deps", "gitlab"},
	"scan":              {"deps", "gitlab"},
	"scheduler":         {"chain", "deps"},
	"verify":            {"deps"},
	"registry":          {"verify"},
	"webhook":           {"chain"},
	"report":            {"deps", "scan"},
	"config":            {"chain", "deps", "gitlab", "scan", "scheduler", "verify", "webhook"},
	"dashboard":         {"chain", "deps", "gitlab", "report", "scan", "scheduler", "verify", "visible"},
	"store/pgtest":      {"internal/realtest"},
	"signin":            {"gitlab"},
	"visible":           {"chain", "deps", "scan", "scheduler", "verify"},
}

// imports maps each package directory (relative to the module root) to
// the depsd packages its non-test files import.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "podman-executor" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if dep, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out[rel], dep) {
				out[rel] = append(out[rel], dep)
			}
		}
		if _, ok := out[rel]; !ok {
			out[rel] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportRules(t *testing.T) {
	all := imports(t)
	if len(all) < 10 {
		t.Fatalf("found %d packages: the walk is broken", len(all))
	}
	for pkg, deps := range all {
		if want, listed := allowed[pkg]; listed {
			for _, d := range deps {
				if !slices.Contains(want, d) {
					t.Errorf("%s imports %s: ARCHITECTURE.md allows only %v", pkg, d, want)
				}
			}
		}
		for _, d := range deps {
			switch {
			case strings.HasPrefix(d, "cmd/"):
				t.Errorf("%s imports %s: nothing imports a command", pkg, d)
			case d == "daemon" && !slices.Contains([]string{"cmd/depsd", "demo", "e2e", "bench"}, pkg):
				t.Errorf("%s imports daemon: only cmd/depsd and demo may", pkg)
			case d == "gitlab/gitlabtest" && pkg != "demo" && !strings.HasPrefix(pkg, "e2e") && !strings.HasPrefix(pkg, "bench"):
				t.Errorf("%s imports the fake GitLab outside tests: only demo may", pkg)
			}
		}
	}
}

// TestRuleCanFail: the walk sees a forbidden import when there is one.
func TestRuleCanFail(t *testing.T) {
	all := imports(t)
	if !slices.Contains(all["cmd/depsd"], "daemon") || !slices.Contains(all["store"], "scan") {
		t.Errorf("imports not found: cmd/depsd %v, store %v", all["cmd/depsd"], all["store"])
	}
	if _, err := os.Stat("../../ARCHITECTURE.md"); err != nil {
		t.Errorf("the rules' source is missing: %v", err)
	}
}
