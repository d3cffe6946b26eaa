package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Problems is every problem found in a configuration at once, so a user
// fixes them in one go instead of one per run.
type Problems []error

func (p Problems) Error() string {
	if len(p) == 1 {
		return p[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in the configuration:", len(p))
	for _, e := range p {
		b.WriteString("\n  - ")
		b.WriteString(strings.ReplaceAll(e.Error(), "\n", "\n    "))
	}
	return b.String()
}

// Unwrap lets errors.Is and errors.As see each problem.
func (p Problems) Unwrap() []error { return p }

// orNil is p as an error, nil when empty.
func (p Problems) orNil() error {
	if len(p) == 0 {
		return nil
	}
	return p
}

// notInFile are keys of the configuration that are deliberately not read
// from the file, with what to write instead.
var notInFile = map[string]string{
	"gitlab.token":                 "gitlab.token is never read from the file (it would end up in backups and version control): write token_file: /path/to/token, or set GITLAB_TOKEN",
	"hooks.secret":                 "hooks.secret is never read from the file: write secret_file: /path/to/secret, or set DEPSD_WEBHOOK_SECRET",
	"webhook":                      "webhook is not a known key: the webhook settings are under hooks: (hooks.signing, hooks.signing_token_file, hooks.mode)",
	"hooks.signing_token":          "hooks.signing_token is never read from the file: write signing_token_file: /path/to/token, or set DEPSD_WEBHOOK_SIGNING_TOKEN",
	"ui.oauth.client_secret":       "ui.oauth.client_secret is never read from the file: write client_secret_file: /path/to/secret, or set DEPSD_UI_OAUTH_CLIENT_SECRET",
	"hooks.signing_token_previous": "hooks.signing_token_previous is never read from the file: write signing_token_previous_file: /path/to/token, or set DEPSD_WEBHOOK_SIGNING_TOKEN_PREVIOUS",
}

var (
	durationType    = reflect.TypeFor[time.Duration]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// checkKeys walks the YAML document beside the Go type it decodes into and
// reports, in the user's terms, every unknown key and every value of the
// wrong kind, with its line: "depsd.yaml:3: gitlab.urll is not a known key
// (known: url, token_file, ...)" rather than the decoder's Go type names.
func checkKeys(file string, n *yaml.Node, t reflect.Type, key string, out *Problems) {
	if n == nil {
		return
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			checkKeys(file, c, t, key, out)
		}
		return
	}
	if n.Kind == yaml.AliasNode || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // the type checks itself
	}
	bad := func(format string, args ...any) {
		*out = append(*out, &FileError{File: file, Line: n.Line, Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			bad("%s: want a duration; write e.g. 30s", key)
		} else if _, err := time.ParseDuration(n.Value); err != nil {
			bad("%s: %s is not a duration; write e.g. 30s, 5m or 1h", key, n.Value)
		}
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			bad("%s: want a mapping with the keys %s", orTop(key), strings.Join(fieldNames(t), ", "))
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sub := joinKey(key, k.Value)
			f, ok := fields[k.Value]
			if !ok {
				msg := fmt.Sprintf("%s is not a known key (known: %s)", sub, strings.Join(fieldNames(t), ", "))
				if hint, ok := notInFile[sub]; ok {
					msg = hint
				} else if near := nearest(k.Value, fieldNames(t)); near != "" {
					msg = fmt.Sprintf("%s is not a known key: did you mean %s? (known: %s)", sub, joinKey(key, near), strings.Join(fieldNames(t), ", "))
				}
				*out = append(*out, &FileError{File: file, Line: k.Line, Key: sub, Msg: msg})
				continue
			}
			checkKeys(file, v, f, sub, out)
		}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		// Keys the user names (refs[].publish: a branch per key).
		if n.Kind != yaml.MappingNode {
			bad("%s: want a mapping, e.g. main: [...]", key)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkKeys(file, n.Content[i+1], t.Elem(), joinKey(key, n.Content[i].Value), out)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			bad("%s: want a list, e.g. [a, b] or one \"- item\" per line", key)
			return
		}
		for i, c := range n.Content {
			checkKeys(file, c, t.Elem(), fmt.Sprintf("%s[%d]", key, i), out)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			bad("%s: want a single value, not a list or mapping", key)
			return
		}
		v := reflect.New(t)
		if err := n.Decode(v.Interface()); err != nil {
			bad("%s: %s is not %s", key, n.Value, kindExample(t))
		}
	}
}

// yamlFields maps the YAML keys of struct t to their types, following
// inline fields and leaving out those tagged "-".
func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			maps := yamlFields(f.Type)
			for k, v := range maps {
				m[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	return m
}

// fieldNames are the YAML keys of struct t in declaration order.
func fieldNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "inline"):
			names = append(names, fieldNames(f.Type)...)
		case name == "":
			names = append(names, strings.ToLower(f.Name))
		default:
			names = append(names, name)
		}
	}
	return names
}

// Keys lists every key of the configuration file in dotted form
// (gitlab.url, schedules[].cron, ...), for documentation and its test.
func Keys() []string {
	var keys []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		fields := yamlFields(t)
		for _, name := range fieldNames(t) {
			k := joinKey(prefix, name)
			keys = append(keys, k)
			ft := fields[name]
			if ft.Kind() == reflect.Slice {
				ft = ft.Elem()
				k += "[]"
			}
			if ft.Kind() == reflect.Struct && ft != durationType {
				walk(ft, k)
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return keys
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func orTop(key string) string {
	if key == "" {
		return "the file"
	}
	return key
}

// kindExample says what a scalar of type t looks like.
func kindExample(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number; write e.g. 8"
	case reflect.Bool:
		return "true or false"
	default:
		return "a " + t.String()
	}
}

// nearest is the candidate within two edits of s, if there is one.
func nearest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
