// Package doccheck finds broken relative links in the repository's
// Markdown: a link to a file that does not exist, or to an anchor that no
// heading of the target file makes (GitHub's heading anchors). Its test
// runs it over the whole repository.
package doccheck

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Problem is one broken link.
type Problem struct {
	File   string // slash path relative to the root
	Line   int
	Target string // the link as written
	Why    string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: link %q: %s", p.File, p.Line, p.Target, p.Why)
}

// Link is a link found in a Markdown text.
type Link struct {
	Line   int
	Target string
}

var (
	// [text](target) and ![alt](target); the target ends at the first
	// space (a title may follow) or closing parenthesis.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// [label]: target
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// Links returns the links of a Markdown text outside code blocks and code
// spans.
func Links(text string) []Link {
	var out []Link
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if f, ok := fenceOf(trimmed); ok {
			switch {
			case fence == "":
				fence = f
				continue
			case strings.HasPrefix(trimmed, fence) && strings.TrimLeft(trimmed, fence[:1]) == "":
				fence = ""
				continue
			}
		}
		if fence != "" {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Line: i + 1, Target: m[1]})
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			out = append(out, Link{Line: i + 1, Target: m[1]})
		}
	}
	return out
}

// fenceOf reports a line opening or closing a fenced code block, and its
// fence (``` or ~~~, at least three).
func fenceOf(trimmed string) (string, bool) {
	for _, c := range []string{"`", "~"} {
		n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
		if n >= 3 {
			return strings.Repeat(c, n), true
		}
	}
	return "", false
}

// Anchors returns the anchors a Markdown text's headings get on GitHub
// (and explicit <a name|id="..."> anchors): the heading's text, lower
// case, without its punctuation, spaces as hyphens; a repeated one gets
// -1, -2, ...
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if f, ok := fenceOf(trimmed); ok {
			switch {
			case fence == "":
				fence = f
				continue
			case strings.HasPrefix(trimmed, fence) && strings.TrimLeft(trimmed, fence[:1]) == "":
				fence = ""
				continue
			}
		}
		if fence != "" {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if len(line)-len(title) > 6 || (title != "" && title[0] != ' ' && title[0] != '\t') {
			continue // not an ATX heading
		}
		slug := Slug(title)
		if n, ok := seen[slug]; ok {
			seen[slug] = n + 1
			out[fmt.Sprintf("%s-%d", slug, n+1)] = true
			continue
		}
		seen[slug] = 0
		out[slug] = true
	}
	return out
}

var linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// Slug is GitHub's anchor of a heading's text.
func Slug(title string) string {
	title = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(title), "#"))
	title = linkText.ReplaceAllString(title, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Check reads every Markdown file under root (skipping .git and
// directories named testdata or node_modules) and returns its broken
// relative links. Links to pages in pending (slash paths relative to
// root) are not checked while those pages do not exist.
func Check(root string, pending map[string]bool) ([]Problem, error) {
	var problems []Problem
	texts := map[string]string{}
	read := func(rel string) (string, error) {
		if t, ok := texts[rel]; ok {
			return t, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return "", err
		}
		texts[rel] = string(b)
		return string(b), nil
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		text, err := read(rel)
		if err != nil {
			return err
		}
		for _, l := range Links(text) {
			if why := checkLink(root, rel, l.Target, pending, read); why != "" {
				problems = append(problems, Problem{File: rel, Line: l.Line, Target: l.Target, Why: why})
			}
		}
		return nil
	})
	return problems, err
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// checkLink says what is wrong with target, a link in the file from (a
// slash path relative to root), or "".
func checkLink(root, from, target string, pending map[string]bool, read func(string) (string, error)) string {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "" // another site: not ours to check
	}
	file, anchor, _ := strings.Cut(target, "#")
	if i := strings.IndexByte(file, '?'); i >= 0 {
		file = file[:i]
	}
	rel := from
	if file != "" {
		if strings.HasPrefix(file, "/") {
			rel = path.Clean(strings.TrimPrefix(file, "/"))
		} else {
			rel = path.Join(path.Dir(from), file)
		}
	}
	if strings.HasPrefix(rel, "../") || rel == ".." {
		return "points outside the repository"
	}
	info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		if pending[rel] {
			return "" // a page announced, not written yet (see pending)
		}
		return "no such file " + rel
	}
	if anchor == "" {
		return ""
	}
	if info.IsDir() || !strings.HasSuffix(rel, ".md") {
		return "an anchor into " + rel + ", which is not a Markdown file"
	}
	text, err := read(rel)
	if err != nil {
		return err.Error()
	}
	if !Anchors(text)[anchor] {
		return "no heading in " + rel + " makes the anchor #" + anchor
	}
	return ""
}
