package doccheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pending are pages the README and docs/ already link to, written by
// work not merged yet. A link to one of them is not checked while the page
// does not exist. Empty this list as they land: TestPendingPagesAreMissing
// fails for a listed page that exists.
var pending = map[string]bool{}

// root is the repository, two levels above this package.
const root = "../.."

// Every relative link and anchor in the repository's Markdown leads
// somewhere: a page moved or a heading renamed breaks this test, not a
// reader's click.
func TestRepositoryLinks(t *testing.T) {
	problems, err := Check(root, pending)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestPendingPagesAreMissing(t *testing.T) {
	for page := range pending {
		if _, err := os.Stat(filepath.Join(root, page)); err == nil {
			t.Errorf("%s exists now: remove it from pending in internal/doccheck/doccheck_test.go so that links to it are checked", page)
		}
	}
}

// GitHub's anchors, as its renderer makes them from headings.
func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Getting started", "getting-started"},
		{"`depsd check`: try it on local checkouts", "depsd-check-try-it-on-local-checkouts"},
		{"GitLab's rate limit is exhausted", "gitlabs-rate-limit-is-exhausted"},
		{"Where the remaining time goes (pprof)", "where-the-remaining-time-goes-pprof"},
		{"Replicas on PostgreSQL", "replicas-on-postgresql"},
		{"A [linked](https://x.example) title", "a-linked-title"},
		{"snake_case and 2,000 projects", "snake_case-and-2000-projects"},
		{"Closing hashes ##", "closing-hashes"},
		{"Ünïcode stays", "ünïcode-stays"},
	} {
		if got := Slug(tc.heading); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

// The checker itself, on a small tree: what it must report and what it
// must let pass.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"README.md": strings.Join([]string{
			"# Title",
			"[ok](docs/a.md) [ok anchor](docs/a.md#second-part) [self](#title) [dup](docs/a.md#same-1)",
			"![img](docs/pic.png) [ext](https://example.com/x.md#nope) [mail](mailto:x@example.com)",
			"[missing](docs/nope.md) [bad anchor](docs/a.md#nowhere) [self bad](#nowhere)",
			"`[in code](docs/nope.md)`",
			"```",
			"[in a block](docs/nope.md)",
			"```",
			"[ref]: docs/gone.md",
			"[pending](docs/later.md) [outside](../x.md)",
			"[anchor into a picture](docs/pic.png#x)",
		}, "\n"),
		"docs/a.md":    "# A\n\n## Second part\n\n## Same\n\n## Same\n\n[up](../README.md#title)\n",
		"docs/pic.png": "png",
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	problems, err := Check(dir, map[string]bool{"docs/later.md": true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.File+":"+p.Target)
	}
	want := []string{
		"README.md:docs/nope.md", "README.md:docs/a.md#nowhere", "README.md:#nowhere",
		"README.md:docs/gone.md", "README.md:../x.md", "README.md:docs/pic.png#x",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q\n%v", got, want, problems)
	}
}
