package deps

import (
	"errors"
	"strings"
	"testing"
)

const (
	oldRuby  = "sha256:1f38c0d0a1f2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"
	newRuby  = "sha256:2a11e9f8d7c6b5a4938271605f4e3d2c1b0a99887766554433221100ffeeddcc"
	oldRuby2 = "sha256:3b22aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	debian   = "sha256:4c33bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	ruby     = "registry.example.com/acme/ruby"
)

// TestMovePins is the rewrite's table: each pin of the moved repository
// takes the new digest, written where the file writes it (FROM, an ARG
// default, with or without its tag, the digest alone in an ARG), and
// nothing else of the file changes: comments, spacing, the tag, CRLF line
// endings, a pin of an image outside the move, the same digest written
// in a comment.
func TestMovePins(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
		moved           []string // "line:from" of each pin moved
		from            string   // the move's From
	}{
		{
			name:  "FROM with tag and digest",
			src:   "# build on ruby 3\nFROM  registry.example.com/acme/ruby:3@" + oldRuby + "   AS build\nRUN make\n",
			want:  "# build on ruby 3\nFROM  registry.example.com/acme/ruby:3@" + newRuby + "   AS build\nRUN make\n",
			moved: []string{"2:" + oldRuby},
		},
		{
			name:  "FROM with digest alone",
			src:   "FROM registry.example.com/acme/ruby@" + oldRuby + "\n",
			want:  "FROM registry.example.com/acme/ruby@" + newRuby + "\n",
			moved: []string{"1:" + oldRuby},
		},
		{
			name:  "ARG default used by FROM",
			src:   "ARG RUBY=registry.example.com/acme/ruby:latest@" + oldRuby + "\n# the pin moves in review\nFROM ${RUBY}\n",
			want:  "ARG RUBY=registry.example.com/acme/ruby:latest@" + newRuby + "\n# the pin moves in review\nFROM ${RUBY}\n",
			moved: []string{"3:" + oldRuby},
		},
		{
			name:  "digest alone in an ARG",
			src:   "ARG RUBY_DIGEST=" + oldRuby + "\nFROM registry.example.com/acme/ruby@${RUBY_DIGEST}\n",
			want:  "ARG RUBY_DIGEST=" + newRuby + "\nFROM registry.example.com/acme/ruby@${RUBY_DIGEST}\n",
			moved: []string{"2:" + oldRuby},
		},
		{
			name:  "registry through a variable",
			src:   "ARG REGISTRY=registry.example.com\nFROM ${REGISTRY}/acme/ruby@" + oldRuby + "\n",
			want:  "ARG REGISTRY=registry.example.com\nFROM ${REGISTRY}/acme/ruby@" + newRuby + "\n",
			moved: []string{"2:" + oldRuby},
		},
		{
			name: "several in one file",
			src: "FROM registry.example.com/acme/ruby:3@" + oldRuby + " AS build\n" +
				"FROM registry.example.com/acme/ruby:3-slim@" + oldRuby2 + "\n" +
				"COPY --from=registry.example.com/acme/ruby@" + oldRuby + " /usr/local /usr/local\n",
			want: "FROM registry.example.com/acme/ruby:3@" + newRuby + " AS build\n" +
				"FROM registry.example.com/acme/ruby:3-slim@" + newRuby + "\n" +
				"COPY --from=registry.example.com/acme/ruby@" + newRuby + " /usr/local /usr/local\n",
			moved: []string{"1:" + oldRuby, "2:" + oldRuby2, "3:" + oldRuby},
		},
		{
			name:  "CRLF, comments and spacing kept",
			src:   "# syntax: keep me\r\n\r\nARG  RUBY=registry.example.com/acme/ruby:3@" + oldRuby + "\r\nFROM\t${RUBY}\r\n\r\n# was " + oldRuby + "\r\nRUN echo hi  \r\n",
			want:  "# syntax: keep me\r\n\r\nARG  RUBY=registry.example.com/acme/ruby:3@" + newRuby + "\r\nFROM\t${RUBY}\r\n\r\n# was " + oldRuby + "\r\nRUN echo hi  \r\n",
			moved: []string{"4:" + oldRuby},
		},
		{
			name: "a pin of an image outside the move left alone",
			src: "FROM docker.io/library/debian@" + debian + " AS tools\n" +
				"FROM registry.example.com/acme/ruby@" + oldRuby + "\n" +
				"COPY --from=tools /bin/x /bin/x\n",
			want: "FROM docker.io/library/debian@" + debian + " AS tools\n" +
				"FROM registry.example.com/acme/ruby@" + newRuby + "\n" +
				"COPY --from=tools /bin/x /bin/x\n",
			moved: []string{"2:" + oldRuby},
		},
		{
			name: "the same digest pinning a mirror left alone",
			src: "FROM mirror.example.com/acme/ruby@" + oldRuby + " AS mirror\n" +
				"FROM registry.example.com/acme/ruby@" + oldRuby + "\n",
			want: "FROM mirror.example.com/acme/ruby@" + oldRuby + " AS mirror\n" +
				"FROM registry.example.com/acme/ruby@" + newRuby + "\n",
			moved: []string{"2:" + oldRuby},
		},
		{
			name: "a move from one digest leaves the others",
			src: "FROM registry.example.com/acme/ruby:3@" + oldRuby + " AS build\n" +
				"FROM registry.example.com/acme/ruby:3-slim@" + oldRuby2 + "\n",
			want: "FROM registry.example.com/acme/ruby:3@" + oldRuby + " AS build\n" +
				"FROM registry.example.com/acme/ruby:3-slim@" + newRuby + "\n",
			moved: []string{"2:" + oldRuby2},
			from:  oldRuby2,
		},
		{
			name: "already on the new digest: nothing moves",
			src:  "FROM registry.example.com/acme/ruby:3@" + newRuby + "\n",
			want: "FROM registry.example.com/acme/ruby:3@" + newRuby + "\n",
		},
		{
			name: "not pinned: nothing moves",
			src:  "FROM registry.example.com/acme/ruby:3\n",
			want: "FROM registry.example.com/acme/ruby:3\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, moved, err := MovePins("Containerfile", []byte(tc.src), []PinMove{{Repository: ruby, From: tc.from, To: newRuby}}, Options{})
			if err != nil {
				t.Fatalf("MovePins: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("rewritten file:\n%q\nwant\n%q", got, tc.want)
			}
			var lines []string
			for _, m := range moved {
				if m.Repository != ruby || m.To != newRuby {
					t.Errorf("moved %+v: want repository %s to %s", m, ruby, newRuby)
				}
				lines = append(lines, itoa(m.Line)+":"+m.From)
			}
			if strings.Join(lines, " ") != strings.Join(tc.moved, " ") {
				t.Errorf("moved %v, want %v", lines, tc.moved)
			}
		})
	}
}

// TestMovePinsRefuses: a move that would change anything but the pins'
// digests, or leave a pin of the repository behind, is refused rather
// than written.
func TestMovePinsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, src, to string
	}{
		{"a digest that is not one", "FROM registry.example.com/acme/ruby@" + oldRuby + "\n", "latest"},
		{"a digest split across variables", "ARG HEX=" + strings.TrimPrefix(oldRuby, "sha256:") + "\nFROM registry.example.com/acme/ruby@sha256:${HEX}\n", newRuby},
		{"a file that does not parse", "RUN make\n", newRuby},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := MovePins("Containerfile", []byte(tc.src), []PinMove{{Repository: ruby, To: tc.to}}, Options{})
			if err == nil {
				t.Fatalf("MovePins moved the pins:\n%s", got)
			}
			if tc.name != "a file that does not parse" && !errors.Is(err, ErrPinNotMovable) {
				t.Errorf("error %v, want ErrPinNotMovable", err)
			}
		})
	}
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		n /= 10
		if n == 0 {
			return s
		}
	}
}
