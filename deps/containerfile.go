package deps

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// FileAnalysis is what one dependency file declares.
type FileAnalysis struct {
	Dependencies []Dependency
	Warnings     []Warning
}

// ParseError says a file could not be analysed at all, and where.
type ParseError struct {
	File string
	Line int // 0 when the parser gave no position
	Err  error
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// isBuiltinPlatformArg reports the ARGs BuildKit defines by itself. Their
// values depend on the machine that builds, so an image named with them
// cannot be resolved statically.
func isBuiltinPlatformArg(name string) bool {
	switch name {
	case "TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT",
		"BUILDPLATFORM", "BUILDOS", "BUILDARCH", "BUILDVARIANT":
		return true
	}
	return false
}

// AnalyzeContainerfile returns every external image a Containerfile
// depends on: FROM images, COPY --from images and RUN --mount from images,
// with ARG defaults expanded. References to earlier build stages and
// FROM scratch are not dependencies. A problem with one instruction becomes
// a warning with its line; only a file the parser rejects as a whole is an
// error (*ParseError).
func AnalyzeContainerfile(file string, src []byte) (FileAnalysis, error) {
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		return FileAnalysis{}, &ParseError{File: file, Line: errorLine(err), Err: errors.Unwrap(err)}
	}
	a := &analysis{file: file, lex: shell.NewLex(res.EscapeToken), escape: res.EscapeToken}
	a.run(res.AST.Children)
	return a.out, nil
}

// errorLine digs the line number out of a BuildKit parser error.
func errorLine(err error) int {
	var loc interface{ Location() []parser.Range }
	for e := err; e != nil; e = errors.Unwrap(e) {
		if l, ok := e.(interface{ Location() []parser.Range }); ok {
			loc = l
			break
		}
	}
	if loc != nil {
		if r := loc.Location(); len(r) > 0 {
			return r[0].Start.Line
		}
	}
	return 0
}

// instruction is one parsed line of the file, kept with its node for the
// line number and the original text.
type instruction struct {
	node *parser.Node
	cmd  any
}

// analysis walks the instructions once, with the scopes BuildKit uses:
// FROM sees only the ARGs declared before the first FROM; instructions in a
// stage see the stage's own ARGs (a global ARG only when redeclared) and ENV.
type analysis struct {
	file   string
	lex    *shell.Lex
	escape rune
	out    FileAnalysis

	global     *scope
	stage      *scope
	stageNames map[string]bool // every stage name in the file, lower case
	opened     map[string]bool // stage names opened so far, lower case
	stageCount int             // stages opened so far
}

func (a *analysis) run(nodes []*parser.Node) {
	var parsed []instruction
	a.stageNames = map[string]bool{}
	a.opened = map[string]bool{}
	for _, n := range nodes {
		cmd, err := instructions.ParseInstruction(n)
		if err != nil {
			a.warn(n.StartLine, "invalid %s instruction: %v", strings.ToUpper(n.Value), cleanErr(err))
			continue
		}
		if st, ok := cmd.(*instructions.Stage); ok && st.Name != "" {
			a.stageNames[st.Name] = true
		}
		parsed = append(parsed, instruction{node: n, cmd: cmd})
	}

	a.global = newScope()
	for _, in := range parsed {
		line := in.node.StartLine
		if a.stage == nil {
			switch in.cmd.(type) {
			case *instructions.ArgCommand, *instructions.Stage:
			default:
				// BuildKit rejects this file; say where and go on.
				a.warn(line, "%s before the first FROM", strings.ToUpper(in.node.Value))
				continue
			}
		}
		switch c := in.cmd.(type) {
		case *instructions.ArgCommand:
			if a.stage == nil {
				a.declareArgs(a.global, nil, c, line)
			} else {
				a.declareArgs(a.stage, a.global, c, line)
			}
		case *instructions.Stage:
			a.from(c, line)
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				if v, ok := a.expand(kv.Value, a.stage, line); ok {
					a.stage.set(kv.Key, v)
				}
			}
		case *instructions.CopyCommand:
			if c.From != "" {
				a.stageOrImage(KindCopyFrom, c.From, line)
			}
		case *instructions.RunCommand:
			for _, m := range instructions.GetMounts(c) {
				if m.From != "" {
					a.stageOrImage(KindMountFrom, m.From, line)
				}
			}
		}
	}
	sort.SliceStable(a.out.Dependencies, func(i, j int) bool {
		return a.out.Dependencies[i].Line < a.out.Dependencies[j].Line
	})
}

// declareArgs records ARG instructions. In a stage, an ARG without a value
// takes the global default of the same name, as BuildKit does.
func (a *analysis) declareArgs(s, global *scope, c *instructions.ArgCommand, line int) {
	for _, kv := range c.Args {
		switch {
		case kv.Value != nil:
			if v, ok := a.expand(*kv.Value, s, line); ok {
				s.set(kv.Key, v)
			} else {
				s.declare(kv.Key)
			}
		case global != nil && global.has(kv.Key):
			s.set(kv.Key, global.vals[kv.Key])
		default:
			s.declare(kv.Key)
		}
	}
}

// from handles FROM: an external image, an earlier stage, or scratch.
func (a *analysis) from(st *instructions.Stage, line int) {
	ref := st.BaseName
	defer func() {
		a.stage = newScope()
		a.opened[st.Name] = true
		a.stageCount++
	}()
	name, ok := a.expand(ref, a.global, line)
	if !ok {
		a.unresolved(KindFrom, ref, a.global, line)
		return
	}
	if name == "scratch" {
		return
	}
	if a.opened[strings.ToLower(name)] {
		return // BuildKit resolves FROM names against earlier stages only
	}
	a.image(KindFrom, ref, name, line)
}

// stageOrImage handles COPY --from and RUN --mount from: a stage by name
// (anywhere in the file) or by index, or else an image.
func (a *analysis) stageOrImage(kind Kind, ref string, line int) {
	name, ok := a.expand(ref, a.stage, line)
	if !ok {
		a.unresolved(kind, ref, a.stage, line)
		return
	}
	if a.stageNames[strings.ToLower(name)] {
		return
	}
	if idx, err := strconv.Atoi(name); err == nil {
		if idx < 0 || idx >= a.stageCount {
			a.warn(line, "%s refers to stage %d, but only %d stage(s) precede it", kind, idx, a.stageCount)
		}
		return
	}
	a.image(kind, ref, name, line)
}

// image records an external image dependency, or a warning when the
// expanded reference is not a valid image name.
func (a *analysis) image(kind Kind, ref, expanded string, line int) {
	img, err := NormalizeImage(expanded)
	if err != nil {
		a.warn(line, "%s: %s", kind, cleanErr(err))
		a.out.Dependencies = append(a.out.Dependencies, Dependency{Kind: kind, Line: line, Ref: ref})
		return
	}
	a.out.Dependencies = append(a.out.Dependencies, Dependency{
		Kind: kind, Line: line, Ref: ref,
		Image: img.Image, Repository: img.Repository, Tag: img.Tag, Digest: img.Digest,
	})
}

// unresolvedMarker stands in for variables without a value when
// unresolved looks for the repository; it is valid in a path and a tag.
const unresolvedMarker = "depsd-unresolved-value"

// unresolved records a dependency whose reference could not be expanded;
// the warning has already said why. When only the tag or digest is unknown
// (FROM registry.example.com/group/base:${TAG}), the repository still
// names the upstream, so it is kept.
func (a *analysis) unresolved(kind Kind, ref string, s *scope, line int) {
	d := Dependency{Kind: kind, Line: line, Ref: ref}
	trial := newScope()
	for k, v := range s.vals {
		trial.vals[k] = v
	}
	for _, name := range a.valuelessVars(ref, s) {
		trial.vals[name] = unresolvedMarker
	}
	if res, err := a.lex.ProcessWordWithMatches(ref, trial); err == nil {
		if img, err := NormalizeImage(res.Result); err == nil && !strings.Contains(img.Repository, unresolvedMarker) {
			d.Repository = img.Repository
		}
	}
	a.out.Dependencies = append(a.out.Dependencies, d)
}

// expand expands $VAR, ${VAR}, ${VAR:-default} and the other forms
// BuildKit's shell lexer knows. It fails (with a warning) when the result
// would depend on a variable without a value: an ARG with no default, an
// undeclared variable, or a build-platform ARG.
func (a *analysis) expand(word string, s *scope, line int) (string, bool) {
	if missing := a.valuelessVars(word, s); len(missing) > 0 {
		for _, name := range missing {
			switch {
			case isBuiltinPlatformArg(name):
				a.warn(line, "%s depends on the build platform (%s): reference left unresolved", word, name)
			case s.declared[name]:
				a.warn(line, "ARG %s has no default value: %s left unresolved", name, word)
			default:
				a.warn(line, "variable %s is not declared: %s left unresolved", name, word)
			}
		}
		return "", false
	}
	res, err := a.lex.ProcessWordWithMatches(word, s)
	if err != nil {
		a.warn(line, "cannot expand %s: %v", word, cleanErr(err))
		return "", false
	}
	if res.Result == "" {
		a.warn(line, "%s expands to an empty reference", word)
		return "", false
	}
	return res.Result, true
}

// valuelessVars lists the variables of word used in the plain forms $NAME
// and ${NAME} that have no value in s. The forms with an operator
// (${NAME:-default} and friends) are left to the lexer: they are meant to
// work without a value.
func (a *analysis) valuelessVars(word string, s *scope) []string {
	var missing []string
	for i := 0; i < len(word); i++ {
		switch word[i] {
		case byte(a.escape):
			i++ // the escaped character is literal
		case '\'':
			// Single quotes keep $ literal, as in the shell.
			if j := strings.IndexByte(word[i+1:], '\''); j >= 0 {
				i += j + 1
			}
		case '$':
			name, braced, end := varAt(word, i+1)
			if name == "" {
				continue
			}
			if braced && (end >= len(word) || word[end] != '}') {
				continue // an operator form, or a syntax error the lexer reports
			}
			if _, ok := s.Get(name); !ok {
				missing = append(missing, name)
			}
			i = end - 1
		}
	}
	return missing
}

// varAt reads a variable name starting at word[i] (after the '$'), in the
// form NAME or {NAME; end is the index just past the name.
func varAt(word string, i int) (name string, braced bool, end int) {
	if i < len(word) && word[i] == '{' {
		braced = true
		i++
	}
	j := i
	for j < len(word) && (word[j] == '_' || isAlnum(word[j])) {
		j++
	}
	return word[i:j], braced, j
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (a *analysis) warn(line int, format string, args ...any) {
	a.out.Warnings = append(a.out.Warnings, Warning{File: a.file, Line: line, Message: fmt.Sprintf(format, args...)})
}

// cleanErr drops the stack-carrying wrappers BuildKit adds, keeping the text.
func cleanErr(err error) string {
	return strings.TrimSpace(err.Error())
}
