package deps

import "sort"

// scope holds the variables visible to an instruction. It implements
// BuildKit's shell.EnvGetter so the lexer reads from it directly.
type scope struct {
	vals     map[string]string
	declared map[string]bool // ARGs declared without a value
}

func newScope() *scope {
	return &scope{vals: map[string]string{}, declared: map[string]bool{}}
}

func (s *scope) set(name, value string) {
	s.vals[name] = value
	delete(s.declared, name)
}

func (s *scope) declare(name string) {
	delete(s.vals, name)
	s.declared[name] = true
}

func (s *scope) clone() *scope {
	c := newScope()
	for k, v := range s.vals {
		c.vals[k] = v
	}
	for k := range s.declared {
		c.declared[k] = true
	}
	return c
}

func (s *scope) has(name string) bool {
	_, ok := s.vals[name]
	return ok
}

// Get implements shell.EnvGetter.
func (s *scope) Get(name string) (string, bool) {
	v, ok := s.vals[name]
	return v, ok
}

// Keys implements shell.EnvGetter.
func (s *scope) Keys() []string {
	keys := make([]string, 0, len(s.vals))
	for k := range s.vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
