package executor

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Runner kill timeouts written by RunnerConfig, in whole seconds: GitLab
// Runner reads [runners.custom] graceful_kill_timeout and
// force_kill_timeout as integers and refuses to start on "30s".
const (
	// killMargin is how much longer than stop_grace the runner waits
	// after its SIGTERM, so the driver's own SIGTERM → SIGKILL of the
	// stage (stop_grace) and its clean-up of the stage finish first.
	killMargin = 20
	// forceKillTimeout is the runner's default (10 s): how long it waits
	// after SIGKILL before giving up on the driver's process.
	forceKillTimeout = 10
)

// RunnerConfig writes a [[runners]] section of GitLab Runner's
// config.toml that calls binary (an absolute path) for every stage,
// passing "--config configPath" first when configPath is not empty, with
// c's builds and cache directories and kill timeouts in whole seconds
// above c's stop_grace. url and token are placeholders for the operator
// (or gitlab-runner register) to fill in.
func RunnerConfig(w io.Writer, binary, configPath string, c Config) error {
	var global []string
	if configPath != "" {
		global = []string{"--config", configPath}
	}
	graceful := int(math.Ceil(c.StopGrace.Seconds())) + killMargin
	var b strings.Builder
	fmt.Fprintf(&b, "[[runners]]\n")
	fmt.Fprintf(&b, "  name = \"podman\"\n")
	fmt.Fprintf(&b, "  url = \"https://gitlab.example.com\"\n")
	fmt.Fprintf(&b, "  token = \"glrt-REPLACE-ME\"\n")
	fmt.Fprintf(&b, "  executor = \"custom\"\n")
	fmt.Fprintf(&b, "  builds_dir = %s\n", tomlString(c.BuildsDir))
	fmt.Fprintf(&b, "  cache_dir = %s\n", tomlString(c.CacheDir))
	fmt.Fprintf(&b, "  [runners.custom]\n")
	for _, stage := range []string{"config", "prepare", "run", "cleanup"} {
		fmt.Fprintf(&b, "    %s_exec = %s\n", stage, tomlString(binary))
		fmt.Fprintf(&b, "    %s_args = %s\n", stage, tomlArray(append(append([]string{}, global...), stage)))
	}
	fmt.Fprintf(&b, "    graceful_kill_timeout = %d\n", graceful)
	fmt.Fprintf(&b, "    force_kill_timeout = %d\n", forceKillTimeout)
	_, err := io.WriteString(w, b.String())
	return err
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlArray writes a one-line TOML array of strings.
func tomlArray(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
