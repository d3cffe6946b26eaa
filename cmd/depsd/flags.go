package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// enumValue is a string flag that accepts only the listed values, so a
// typo is a usage error naming the flag and what it takes (issue 12:
// --log-level=verbose and --only bogus passed silently).
type enumValue struct {
	value   *string
	allowed []string
	// aliases are accepted too (an old spelling); not listed in help.
	aliases []string
}

func (e *enumValue) String() string { return *e.value }
func (e *enumValue) Type() string   { return "string" }

func (e *enumValue) Set(v string) error {
	if !slices.Contains(e.allowed, v) && !slices.Contains(e.aliases, v) {
		return fmt.Errorf("want one of %s", strings.Join(e.allowed, ", "))
	}
	*e.value = v
	return nil
}

// enumVar defines a flag that takes one of allowed, with default def.
func enumVar(fs *pflag.FlagSet, p *string, name, def string, allowed []string, usage string) *enumValue {
	*p = def
	v := &enumValue{value: p, allowed: allowed}
	fs.Var(v, name, usage)
	return v
}
