package deps

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/opencontainers/go-digest"
)

// PinMove asks MovePins to move the pins of one repository to a digest:
// those on digest From, or every one when From is empty.
type PinMove struct {
	// Repository is the normalised repository (Dependency.Repository).
	Repository string `json:"repository"`
	From       string `json:"from,omitempty"`
	// To is the digest its pins move to (sha256:…).
	To string `json:"to"`
}

// pinMoves finds the move of a pin of repository on digest from: the
// one naming that digest, else the one for every pin of the repository.
type pinMoves map[[2]string]string

func (pm pinMoves) to(repository, from string) (string, bool) {
	if t, ok := pm[[2]string{repository, from}]; ok {
		return t, true
	}
	t, ok := pm[[2]string{repository, ""}]
	return t, ok
}

// PinMoved is one pin MovePins moved.
type PinMoved struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag,omitempty"`
	From       string `json:"from"`
	To         string `json:"to"`
	// Line is the line of the reference (Dependency.Line), which may be
	// a FROM using an ARG whose default holds the digest.
	Line int `json:"line"`
}

// ErrPinNotMovable: a pin of a moved repository cannot be moved by
// replacing its digest where the file writes it (the digest is put
// together from variables, say), or the replacement would change more
// than the pins. Nothing is written then.
var ErrPinNotMovable = errors.New("pin cannot be moved")

// digestText finds what may be a digest in a file: an algorithm, a colon
// and at least 32 hex digits.
var digestText = regexp.MustCompile(`[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-fA-F0-9]{32,}`)

// MovePins returns src with the digest of every pin of each move's
// repository replaced by the move's digest, and the pins it moved, in file
// order. Only the digests change: where the file writes them (after the
// @ of a reference in a FROM, COPY --from, RUN --mount from= or an ARG
// default, or alone in an ARG default), byte for byte in place, so
// comments, spacing, tags, variables and line endings stay as they were.
// A digest written in a comment is left alone, and so is one written
// after another repository's name (a mirror pinned at the same digest).
// A pin already on its move's digest does not move; a file with nothing
// to move is returned as it is, with no pins.
//
// The result is analysed again: its dependencies must be src's with just
// the moved digests replaced, else the move is refused with
// ErrPinNotMovable (a pin whose digest the file puts together from
// variables cannot be moved by a rewrite). A file AnalyzeContainerfile
// refuses is its error.
func MovePins(file string, src []byte, moves []PinMove, opts Options) ([]byte, []PinMoved, error) {
	to := pinMoves{}
	for _, m := range moves {
		if _, err := digest.Parse(m.To); err != nil {
			return nil, nil, fmt.Errorf("move the pins of %s to %q: %w: not a digest", m.Repository, m.To, ErrPinNotMovable)
		}
		to[[2]string{m.Repository, m.From}] = m.To
	}
	before, err := AnalyzeContainerfile(file, src, opts)
	if err != nil {
		return nil, nil, err
	}
	// owners are the repositories each digest pins in the file;
	// moving says which of those pins move.
	owners := map[string]map[string]bool{}
	var moved []PinMoved
	moving := map[string]bool{}
	for _, d := range before.Dependencies {
		if !d.Pinned {
			continue
		}
		if owners[d.Digest] == nil {
			owners[d.Digest] = map[string]bool{}
		}
		owners[d.Digest][d.Repository] = true
		if t, ok := to.to(d.Repository, d.Digest); ok && t != d.Digest {
			moving[d.Digest] = true
			moved = append(moved, PinMoved{Repository: d.Repository, Tag: d.Tag, From: d.Digest, To: t, Line: d.Line})
		}
	}
	if len(moved) == 0 {
		return src, nil, nil
	}
	code := instructionLines(src)
	var out bytes.Buffer
	last := 0
	for _, loc := range digestText.FindAllIndex(src, -1) {
		start, end := loc[0], loc[1]
		old := string(src[start:end])
		if !moving[old] || (end < len(src) && isAlnum(src[end])) || (start > 0 && isAlnum(src[start-1])) {
			continue
		}
		if !code[lineAt(src, start)] {
			continue // a comment, or outside any instruction
		}
		repo := pinOwner(src, start, old, owners[old])
		t, ok := to.to(repo, old)
		if !ok || t == old {
			continue
		}
		out.Write(src[last:start])
		out.WriteString(t)
		last = end
	}
	out.Write(src[last:])
	got := out.Bytes()

	after, err := AnalyzeContainerfile(file, got, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the rewritten file does not parse: %v", ErrPinNotMovable, err)
	}
	if err := sameButPins(before.Dependencies, after.Dependencies, to); err != nil {
		return nil, nil, err
	}
	sort.SliceStable(moved, func(i, j int) bool { return moved[i].Line < moved[j].Line })
	return got, moved, nil
}

// pinOwner is the repository the digest at src[start:] pins: the one
// written before its @ when that names one, else the only repository
// the file pins at that digest (a digest alone in an ARG default, or
// after a reference written with variables); "" when it cannot tell.
func pinOwner(src []byte, start int, dgst string, owners map[string]bool) string {
	if start > 0 && src[start-1] == '@' {
		i := start - 1
		for i > 0 && isRefByte(src[i-1]) {
			i--
		}
		name := string(src[i : start-1])
		if name != "" && !strings.ContainsAny(name, "${}") {
			img, err := NormalizeImage(name + "@" + dgst)
			if err != nil {
				return ""
			}
			return img.Repository
		}
	}
	if len(owners) != 1 {
		return ""
	}
	for r := range owners {
		return r
	}
	return ""
}

// isRefByte reports whether c may be part of an image reference as a
// file writes it, variables included.
func isRefByte(c byte) bool {
	return isAlnum(c) || strings.IndexByte("._-/:${}", c) >= 0
}

// lineAt is the 1-based line of offset i in src.
func lineAt(src []byte, i int) int { return bytes.Count(src[:i], []byte{'\n'}) + 1 }

// instructionLines are the lines of src that hold an instruction (its
// continuation lines included), less the comment lines BuildKit skips
// inside a continued instruction.
func instructionLines(src []byte) map[int]bool {
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		return nil
	}
	lines := bytes.Split(src, []byte{'\n'})
	out := map[int]bool{}
	for _, n := range res.AST.Children {
		for l := n.StartLine; l <= n.EndLine && l <= len(lines); l++ {
			if t := bytes.TrimLeft(lines[l-1], " \t"); len(t) > 0 && t[0] == '#' {
				continue
			}
			out[l] = true
		}
	}
	return out
}

// sameButPins checks that after is before with the pins of the moved
// repositories on their new digests, and nothing else changed.
func sameButPins(before, after []Dependency, to pinMoves) error {
	if len(before) != len(after) {
		return fmt.Errorf("%w: the rewrite changed the file's dependencies (%d, then %d)", ErrPinNotMovable, len(before), len(after))
	}
	for i, d := range before {
		want := d
		if t, ok := to.to(d.Repository, d.Digest); ok && d.Pinned && t != d.Digest {
			want.Ref = strings.ReplaceAll(d.Ref, d.Digest, t)
			want.Image = strings.TrimSuffix(d.Image, d.Digest) + t
			want.Digest = t
		}
		if after[i] != want {
			what := "changed"
			if after[i].Digest == d.Digest {
				what = "was not moved (its digest is not written whole in the file)"
			}
			return fmt.Errorf("%w: the pin of %s at line %d %s", ErrPinNotMovable, d.Repository, d.Line, what)
		}
	}
	return nil
}
