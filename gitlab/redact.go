package gitlab

import (
	"regexp"
	"strings"
)

// redactor removes secrets from text that may end up in an error or a log
// line: the token itself wherever it appears (GitLab may echo it), token
// query parameters, and user information in URLs.
type redactor struct {
	token string
}

const redacted = "[REDACTED]"

// Patterns are built per call (cheap, error paths only) so the package has no
// mutable globals.
func (r redactor) redact(s string) string {
	if r.token != "" {
		s = strings.ReplaceAll(s, r.token, redacted)
	}
	s = regexp.MustCompile(`(?i)((?:private|access|job|feed)_token=)[^&\s"']*`).ReplaceAllString(s, "${1}"+redacted)
	s = regexp.MustCompile(`(?i)(PRIVATE-TOKEN:\s*|Bearer\s+)[^\s"',]+`).ReplaceAllString(s, "${1}"+redacted)
	s = regexp.MustCompile(`(://)[^/@\s]+@`).ReplaceAllString(s, "${1}"+redacted+"@")
	return s
}
