package deps

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	"github.com/tonistiigi/go-csvvalue"
)

// FileAnalysis is what one dependency file declares.
type FileAnalysis struct {
	Dependencies []Dependency
	Warnings     []Warning
	// Built are the images the built stage (the last one) is FROM,
	// through the stages it is FROM in turn: what its image's layers
	// start with. One per platform at most (the union, in order); none for
	// FROM scratch or a reference that does not resolve. Empty for a
	// .gitlab-deps file.
	Built []string
}

// ParseError says a file cannot be built at all, and where: BuildKit's
// parser or its instruction parser rejects it.
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

// AnalyzeContainerfile returns every external image a Containerfile
// depends on: FROM images, COPY --from images and RUN --mount from images,
// with ARGs expanded as BuildKit expands them for the platforms of opts
// (the union over them). References to build stages, FROM scratch and
// COPY --from=scratch are not dependencies.
//
// A file BuildKit would refuse to build (a syntax error, an instruction
// with bad arguments, a FROM without an image, an instruction before the
// first FROM, no stage at all) is an error (*ParseError with the line).
// Warnings are only about dependencies: a reference left unresolved or
// empty, an invalid one, and a variable in COPY --from or RUN --mount
// from=, which depsd expands as podman does (BuildKit refuses it).
func AnalyzeContainerfile(file string, src []byte, opts Options) (FileAnalysis, error) {
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		line := errorLine(err)
		if line == 0 && strings.Contains(err.Error(), "heredoc") {
			line = unterminatedHeredocLine(src)
		}
		return FileAnalysis{}, &ParseError{File: file, Line: line, Err: errors.Unwrap(err)}
	}
	prog, perr := compile(file, res.AST.Children)
	if perr != nil {
		return FileAnalysis{}, perr
	}
	var out FileAnalysis
	seenDep := map[Dependency]bool{}
	seenWarn := map[Warning]bool{}
	for _, p := range opts.platforms() {
		a := &analysis{file: file, lex: shell.NewLex(res.EscapeToken), escape: res.EscapeToken, prog: prog}
		if err := a.run(p); err != nil {
			return FileAnalysis{}, err
		}
		for _, d := range a.out.Dependencies {
			if !seenDep[d] {
				seenDep[d] = true
				out.Dependencies = append(out.Dependencies, d)
			}
		}
		for _, w := range a.out.Warnings {
			if !seenWarn[w] {
				seenWarn[w] = true
				out.Warnings = append(out.Warnings, w)
			}
		}
		if a.cur != nil && a.cur.base != "" && !slices.Contains(out.Built, a.cur.base) {
			out.Built = append(out.Built, a.cur.base)
		}
	}
	sort.SliceStable(out.Dependencies, func(i, j int) bool { return out.Dependencies[i].Line < out.Dependencies[j].Line })
	sort.SliceStable(out.Warnings, func(i, j int) bool { return out.Warnings[i].Line < out.Warnings[j].Line })
	return out, nil
}

// errorLine digs the line number out of a BuildKit parser error.
func errorLine(err error) int {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if l, ok := e.(interface{ Location() []parser.Range }); ok {
			if r := l.Location(); len(r) > 0 {
				return r[0].Start.Line
			}
			return 0
		}
	}
	return 0
}

// heredocStart finds the opening of a heredoc (<<EOF, <<-"EOF") in a line.
var heredocStart = regexp.MustCompile(`<<(-?)\s*(["']?)([A-Za-z_][A-Za-z0-9_]*)(["']?)`)

// unterminatedHeredocLine returns the line of the first heredoc that is
// never closed, which BuildKit's parser reports without a position; 0 if
// none is found.
func unterminatedHeredocLine(src []byte) int {
	lines := strings.Split(strings.ReplaceAll(string(src), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		for _, m := range heredocStart.FindAllStringSubmatch(lines[i], -1) {
			word, closed := m[3], false
			for j := i + 1; j < len(lines); j++ {
				l := lines[j]
				if m[1] == "-" {
					l = strings.TrimLeft(l, "\t")
				}
				if l == word {
					i, closed = j, true
					break
				}
			}
			if !closed {
				return i + 1
			}
		}
	}
	return 0
}

// program is a parsed file: its nodes, and what is known of its stages
// before any of them is evaluated (BuildKit resolves COPY --from names
// against every stage of the file, later ones included).
type program struct {
	nodes      []*parser.Node
	stageNames map[string]bool // lower case
	stages     int
	target     string // the last stage's name: TARGETSTAGE
}

// compile checks the file's structure as BuildKit's instructions.Parse
// does. Instructions are parsed again, with variables known, by run.
func compile(file string, nodes []*parser.Node) (*program, *ParseError) {
	p := &program{nodes: nodes, stageNames: map[string]bool{}}
	for _, n := range nodes {
		switch strings.ToLower(n.Value) {
		case "from":
			cmd, err := instructions.ParseInstruction(n)
			if err != nil {
				return nil, &ParseError{File: file, Line: n.StartLine, Err: errors.New(cleanErr(err))}
			}
			st := cmd.(*instructions.Stage)
			if st.Name != "" {
				p.stageNames[st.Name] = true
			}
			p.target = st.Name
			p.stages++
		case "arg":
		default:
			if p.stages == 0 {
				return nil, &ParseError{File: file, Line: n.StartLine, Err: fmt.Errorf("%s before the first FROM: no build stage in current context", strings.ToUpper(n.Value))}
			}
		}
	}
	if p.stages == 0 {
		return nil, &ParseError{File: file, Err: errors.New("no FROM: the file contains no stage to build")}
	}
	return p, nil
}

// stage is what one build stage knows while it is evaluated.
type stage struct {
	// env is BuildKit's view inside the stage: ARG and ENV values, the
	// ones of the base stage included when the stage is FROM another one.
	env *scope
	// args are the ARGs declared in the stage: what podman expands
	// COPY --from and RUN --mount from= with.
	args *scope
	// onbuild are the stage's ONBUILD triggers: BuildKit runs them at the
	// start of a stage FROM this one.
	onbuild []string
	// base is the image the stage is FROM, through the stages it is FROM
	// in turn; empty for scratch or an unresolved reference.
	base string
}

// analysis evaluates a program for one platform, with the scopes BuildKit
// uses: FROM sees the platform ARGs and the ARGs declared before the first
// FROM; instructions in a stage see the stage's own ARGs (a global ARG
// only when redeclared there) and ENV.
type analysis struct {
	file   string
	lex    *shell.Lex
	escape rune
	prog   *program
	out    FileAnalysis

	global *scope
	cur    *stage
	opened map[string]*stage // stages opened so far, by lower-case name
	// expandErr keeps why a variable's value could not be expanded, for
	// the warning if a dependency turns out to use it.
	expandErr map[string]string
	// mountRefs maps a from= value expandMountFrom wrote to what the file
	// says.
	mountRefs map[string]string
}

func (a *analysis) run(p Platform) *ParseError {
	a.opened = map[string]*stage{}
	a.expandErr = map[string]string{}
	a.mountRefs = map[string]string{}
	a.global = newScope()
	for k, v := range platformArgs(p, a.prog.target) {
		a.global.set(k, v)
	}
	for _, n := range a.prog.nodes {
		if err := a.step(n, n.StartLine); err != nil {
			return err
		}
	}
	return nil
}

// step evaluates one instruction; line is where it counts (an ONBUILD
// trigger counts on the FROM line that runs it).
func (a *analysis) step(n *parser.Node, line int) *ParseError {
	if a.cur != nil && strings.EqualFold(n.Value, "run") {
		var perr *ParseError
		if n, perr = a.expandMountFrom(n, line); perr != nil {
			return perr
		}
	}
	cmd, err := instructions.ParseInstruction(n)
	if err != nil {
		return &ParseError{File: a.file, Line: line, Err: errors.New(cleanErr(err))}
	}
	switch c := cmd.(type) {
	case *instructions.ArgCommand:
		if a.cur == nil {
			a.globalArgs(c)
		} else {
			a.stageArgs(c)
		}
	case *instructions.Stage:
		return a.from(c, line)
	case *instructions.EnvCommand:
		for _, kv := range c.Env {
			a.cur.env.set(kv.Key, a.value(kv.Key, kv.Value, a.cur.env))
		}
	case *instructions.CopyCommand:
		if c.From != "" {
			return a.copyFrom(c.From, line)
		}
	case *instructions.RunCommand:
		for _, m := range instructions.GetMounts(c) {
			if m.From != "" {
				a.mountFrom(m.From, line)
			}
		}
	case *instructions.OnbuildCommand:
		a.cur.onbuild = append(a.cur.onbuild, c.Expression)
	}
	return nil
}

// globalArgs records ARGs before the first FROM (dockerfile2llb's
// buildMetaArgs): a default is expanded with the ARGs before it, an empty
// default is a value, and an ARG without default leaves an earlier value
// (a platform ARG's, say) as it was.
func (a *analysis) globalArgs(c *instructions.ArgCommand) {
	for _, kv := range c.Args {
		switch {
		case kv.Value != nil:
			a.global.set(kv.Key, a.value(kv.Key, *kv.Value, a.global))
		case !a.global.has(kv.Key):
			a.global.declare(kv.Key)
		}
	}
}

// stageArgs records ARGs in a stage (dockerfile2llb's dispatchArg): one
// without default takes the global value of the same name, platform ARGs
// included; a default is expanded with the stage's ARGs and ENV.
func (a *analysis) stageArgs(c *instructions.ArgCommand) {
	for _, kv := range c.Args {
		switch {
		case kv.Value != nil:
			v := a.value(kv.Key, *kv.Value, a.cur.env)
			a.cur.env.set(kv.Key, v)
			a.cur.args.set(kv.Key, v)
		case a.global.has(kv.Key):
			v := a.global.vals[kv.Key]
			a.cur.env.set(kv.Key, v)
			a.cur.args.set(kv.Key, v)
		default:
			if !a.cur.env.has(kv.Key) {
				a.cur.env.declare(kv.Key)
			}
			a.cur.args.declare(kv.Key)
		}
	}
}

// value expands the value of an ARG or ENV. Nothing is reported here:
// a value that cannot be known carries markers, and only a dependency
// that uses it is warned about.
func (a *analysis) value(key, word string, s *scope) string {
	v, err := a.expand(word, s)
	if err != nil {
		a.expandErr[key] = cleanErr(err)
		return marker(markErr, key)
	}
	return v
}

// from handles FROM: an external image, an earlier stage, or scratch.
func (a *analysis) from(st *instructions.Stage, line int) *ParseError {
	next := &stage{env: newScope(), args: newScope()}
	open := func() {
		a.cur = next
		if st.Name != "" {
			a.opened[st.Name] = next
		}
	}
	name, ok := a.resolve(KindFrom, st.BaseName, st.BaseName, a.global, line)
	if !ok || name == "scratch" {
		open()
		return nil
	}
	// BuildKit matches FROM against the names of earlier stages only, as
	// written (stage names are lower case).
	base, internal := a.opened[name]
	if !internal {
		a.image(KindFrom, st.BaseName, name, line)
		if img, err := NormalizeImage(name); err == nil {
			next.base = img.Image
		}
		open()
		return nil
	}
	next.env = base.env.clone()
	next.base = base.base
	open()
	for _, expr := range base.onbuild {
		res, err := parser.Parse(strings.NewReader(expr))
		if err != nil {
			return &ParseError{File: a.file, Line: line, Err: fmt.Errorf("ONBUILD %s of stage %s: %w", expr, name, err)}
		}
		for _, n := range res.AST.Children {
			if err := a.step(n, line); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyFrom handles COPY --from: a stage by name (anywhere in the file) or
// by index, scratch, or else an image. A variable in it is expanded with
// the stage's ARGs, as podman does, and warned about: BuildKit refuses it.
func (a *analysis) copyFrom(ref string, line int) *ParseError {
	value := ref
	if a.hasVariables(ref) {
		var ok bool
		value, ok = a.resolve(KindCopyFrom, ref, ref, a.cur.args, line)
		if !ok {
			return nil
		}
		a.warn(line, "COPY --from=%s: expanded to %s as podman does; docker build (BuildKit) refuses variables in --from", ref, value)
	}
	if idx, err := strconv.Atoi(value); err == nil {
		if idx < 0 || idx >= a.prog.stages {
			return &ParseError{File: a.file, Line: line, Err: fmt.Errorf("COPY --from=%s: invalid stage index %d (the file has %d stage(s))", ref, idx, a.prog.stages)}
		}
		return nil
	}
	a.stageOrImage(KindCopyFrom, ref, value, line)
	return nil
}

// mountFrom handles RUN --mount from=: a stage by name or an image (no
// index, as in BuildKit). A variable was expanded by expandMountFrom.
func (a *analysis) mountFrom(value string, line int) {
	ref, ok := a.mountRefs[value]
	if !ok {
		ref = value
	}
	if hasMarker(value) {
		a.unresolved(KindMountFrom, ref, value, line)
		return
	}
	if value == "" {
		a.warn(line, "%s%s expands to an empty reference", KindMountFrom.instruction(), ref)
		a.out.Dependencies = append(a.out.Dependencies, Dependency{Kind: KindMountFrom, Line: line, Ref: ref})
		return
	}
	a.stageOrImage(KindMountFrom, ref, value, line)
}

func (a *analysis) stageOrImage(kind Kind, ref, value string, line int) {
	if a.prog.stageNames[strings.ToLower(value)] || value == "scratch" {
		return
	}
	a.image(kind, ref, value, line)
}

// expandMountFrom reads the --mount flags of a RUN as BuildKit's
// parseMount does (each value is one CSV record: a field may be quoted
// and then hold commas) and expands variables in their from= with the
// stage's ARGs, as podman does, before BuildKit's instruction parser
// (which refuses them) sees the node. It returns a copy of n when
// something changed, and an error naming line when a value is not a CSV
// record, which BuildKit refuses too.
func (a *analysis) expandMountFrom(n *parser.Node, line int) (*parser.Node, *ParseError) {
	var flags []string
	for i, f := range n.Flags {
		body, ok := strings.CutPrefix(f, "--mount=")
		if !ok {
			continue
		}
		fields, err := csvvalue.Fields(body, nil)
		if err != nil {
			return nil, &ParseError{File: a.file, Line: line, Err: fmt.Errorf("RUN --mount=%s: %s", body, mountCSVError(err))}
		}
		changed := false
		for j, field := range fields {
			key, val, ok := strings.Cut(field, "=")
			if !ok || strings.ToLower(key) != "from" || !a.hasVariables(val) {
				continue
			}
			v, err := a.expand(val, a.cur.args)
			if err != nil {
				v = marker(markErr, "from")
				a.expandErr["from"] = cleanErr(err)
			}
			if !hasMarker(v) {
				a.warn(line, "RUN --mount from=%s: expanded to %s as podman does; docker build (BuildKit) refuses variables in from=", val, v)
			}
			a.mountRefs[v] = val
			fields[j] = key + "=" + v
			changed = true
		}
		if changed {
			if flags == nil {
				flags = append([]string(nil), n.Flags...)
			}
			flags[i] = "--mount=" + csvRecord(fields)
		}
	}
	if flags == nil {
		return n, nil
	}
	c := *n
	c.Flags = flags
	return &c, nil
}

// mountCSVError says why a --mount value is not a CSV record, with the
// column in the value (csvvalue's line is always 1).
func mountCSVError(err error) string {
	var pe *csv.ParseError
	switch {
	case errors.As(err, &pe):
		return fmt.Sprintf("invalid mount: %v at column %d of the value (BuildKit reads it as one CSV record: quote whole fields, as in \"target=/a,b\")", pe.Err, pe.Column)
	case errors.Is(err, io.EOF):
		return "invalid mount: the value is empty"
	default:
		return "invalid mount: " + cleanErr(err)
	}
}

// csvRecord writes fields back as the one CSV record a --mount value is,
// quoting those that need it (an expanded from= with a comma, a field
// that was quoted in the file), so that BuildKit reads the same fields.
func csvRecord(fields []string) string {
	var b strings.Builder
	w := csv.NewWriter(&b)
	_ = w.Write(fields) // a strings.Builder does not fail, and ',' is a valid delimiter
	w.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// resolve expands ref in s. It records an unresolved dependency (with a
// warning) and answers false when the result is unknown or empty.
func (a *analysis) resolve(kind Kind, ref, word string, s *scope, line int) (string, bool) {
	v, err := a.expand(word, s)
	if err != nil {
		a.warn(line, "%s%s: cannot expand: %s", kind.instruction(), ref, cleanErr(err))
		a.out.Dependencies = append(a.out.Dependencies, Dependency{Kind: kind, Line: line, Ref: ref})
		return "", false
	}
	if hasMarker(v) {
		a.unresolved(kind, ref, v, line)
		return "", false
	}
	if v == "" {
		a.warn(line, "%s%s expands to an empty reference", kind.instruction(), ref)
		a.out.Dependencies = append(a.out.Dependencies, Dependency{Kind: kind, Line: line, Ref: ref})
		return "", false
	}
	return v, true
}

// image records an external image dependency, or a warning when the
// expanded reference is not a valid image name.
func (a *analysis) image(kind Kind, ref, expanded string, line int) {
	img, err := NormalizeImage(expanded)
	if err != nil {
		a.warn(line, "%s%s: %s", kind.instruction(), ref, cleanErr(err))
		a.out.Dependencies = append(a.out.Dependencies, Dependency{Kind: kind, Line: line, Ref: ref})
		return
	}
	a.out.Dependencies = append(a.out.Dependencies, Dependency{
		Kind: kind, Line: line, Ref: ref,
		Image: img.Image, Repository: img.Repository, Tag: img.Tag, Digest: img.Digest, Pinned: img.Digest != "",
	})
}

// unresolvedValue stands in for variables without a value when
// unresolved looks for the repository; it is valid in a path and a tag.
const unresolvedValue = "depsd-unresolved-value"

// unresolved records a dependency whose expansion v still carries
// markers, with a warning naming the variables. When only the tag or
// digest is unknown (FROM registry.example.com/group/base:${TAG}), the
// repository still names the upstream, so it is kept.
func (a *analysis) unresolved(kind Kind, ref, v string, line int) {
	var why []string
	for _, m := range markers(v) {
		switch {
		case m.kind == markErr:
			why = append(why, fmt.Sprintf("the value of %s cannot be expanded (%s)", m.name, a.expandErr[m.name]))
		case m.kind == markNoDefault:
			why = append(why, fmt.Sprintf("ARG %s has no default value", m.name))
		case kind != KindFrom && a.cur.env.has(m.name):
			why = append(why, fmt.Sprintf("%s is an ENV variable, and podman expands --from with ARGs only", m.name))
		case kind != KindFrom && isPlatformArg(m.name):
			why = append(why, fmt.Sprintf("%s is not declared in this stage (add ARG %s)", m.name, m.name))
		default:
			why = append(why, fmt.Sprintf("variable %s is not declared", m.name))
		}
	}
	a.warn(line, "%s%s left unresolved: %s", kind.instruction(), ref, strings.Join(why, "; "))
	d := Dependency{Kind: kind, Line: line, Ref: ref}
	if img, err := NormalizeImage(replaceMarkers(v, unresolvedValue)); err == nil && !strings.Contains(img.Repository, unresolvedValue) {
		d.Repository = img.Repository
	}
	a.out.Dependencies = append(a.out.Dependencies, d)
}

// instruction is how the file writes a dependency of kind k, for warnings.
func (k Kind) instruction() string {
	switch k {
	case KindFrom:
		return "FROM "
	case KindCopyFrom:
		return "COPY --from="
	case KindMountFrom:
		return "RUN --mount from="
	}
	return string(k) + " "
}

// hasVariables reports whether the lexer would change word at all, which
// is BuildKit's test for a variable in --from.
func (a *analysis) hasVariables(word string) bool {
	res, _, err := a.lex.ProcessWord(word, newScope())
	return err != nil || res != word
}

// expand expands $VAR, ${VAR}, ${VAR:-default} and the other forms with
// BuildKit's shell lexer. A variable without a value in the plain forms
// ($VAR, ${VAR}: an ARG without default, or a name never declared) does
// not become empty as in a build without --build-arg: it becomes a marker
// that survives into the result, so that a reference using it is known
// to be unresolved. The operator forms are meant to work without a value
// and expand as in BuildKit.
func (a *analysis) expand(word string, s *scope) (string, error) {
	res, _, err := a.lex.ProcessWord(a.markUnset(word, s), s)
	return res, err
}

// markUnset replaces each plain-form variable of word that has no value
// in s by its marker. References inside an operator form's word are
// replaced too: they only reach the result when that word is used.
func (a *analysis) markUnset(word string, s *scope) string {
	if !strings.Contains(word, "$") {
		return word
	}
	var b strings.Builder
	last := 0
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
			if name == "" || isDigit(name[0]) {
				continue
			}
			if braced {
				if end >= len(word) || word[end] != '}' {
					continue // an operator form, or a syntax error the lexer reports
				}
				end++
			}
			if _, ok := s.Get(name); !ok {
				kind := byte(markUndeclared)
				if s.declared[name] {
					kind = markNoDefault
				}
				b.WriteString(word[last:i])
				b.WriteString(marker(kind, name))
				last = end
			}
			i = end - 1
		}
	}
	if last == 0 {
		return word
	}
	b.WriteString(word[last:])
	return b.String()
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
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Markers stand for unknown values inside expanded strings. They use
// control characters, which cannot occur in a valid reference, so a
// result that still holds one is unresolved.
const (
	markOpen  = '\x01'
	markClose = '\x02'

	markUndeclared = 'u' // a variable never declared
	markNoDefault  = 'a' // an ARG without default value
	markErr        = 'e' // a value whose expansion failed
)

func marker(kind byte, name string) string {
	return string(markOpen) + string(kind) + name + string(markClose)
}

func hasMarker(s string) bool { return strings.IndexByte(s, markOpen) >= 0 }

type mark struct {
	kind byte
	name string
}

// markers lists the distinct markers of s in order.
func markers(s string) []mark {
	var out []mark
	seen := map[mark]bool{}
	for {
		i := strings.IndexByte(s, markOpen)
		if i < 0 {
			return out
		}
		j := strings.IndexByte(s[i:], markClose)
		if j < 2 {
			return out
		}
		m := mark{kind: s[i+1], name: s[i+2 : i+j]}
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
		s = s[i+j+1:]
	}
}

func replaceMarkers(s, with string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, markOpen)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], markClose)
		if j < 0 {
			b.WriteString(s[:i])
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(with)
		s = s[i+j+1:]
	}
}

func (a *analysis) warn(line int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	a.out.Warnings = append(a.out.Warnings, Warning{File: a.file, Line: line, Message: replaceMarkers(msg, "")})
}

// cleanErr drops the stack-carrying wrappers BuildKit adds, keeping the text.
func cleanErr(err error) string {
	return strings.TrimSpace(err.Error())
}
