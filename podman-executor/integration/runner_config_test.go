package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeRunnersSection is the `[[runners]]` section of README.md's
// "Registering" part (the fenced toml block holding it), with every
// commented option enabled: a line `# key = value  # note` becomes
// `key = value`.
func readmeRunnersSection(readme string) (string, error) {
	for rest := readme; ; {
		_, after, ok := strings.Cut(rest, "```toml\n")
		if !ok {
			return "", fmt.Errorf("no ```toml block with a [[runners]] section")
		}
		block, tail, ok := strings.Cut(after, "```")
		if !ok {
			return "", fmt.Errorf("unterminated ```toml block")
		}
		rest = tail
		if !strings.Contains(block, "[[runners]]") {
			continue
		}
		var out strings.Builder
		for _, line := range strings.SplitAfter(block, "\n") {
			if m := commentedOption.FindStringSubmatch(line); m != nil {
				opt, _, _ := strings.Cut(m[2], "  #")
				line = m[1] + strings.TrimRight(opt, " ") + "\n"
			}
			out.WriteString(line)
		}
		return out.String(), nil
	}
}

// commentedOption is a commented-out `key = value` line.
var commentedOption = regexp.MustCompile(`^(\s*)#\s*([A-Za-z_][A-Za-z0-9_]*\s*=.*?)\n?$`)

func TestREADMERunnersSectionParsing(t *testing.T) {
	for _, tc := range []struct {
		name, readme, want, err string
	}{
		{
			name:   "commented options enabled, notes dropped",
			readme: "x\n```sh\n[[runners]]\n```\n```toml\n[[runners]]\n  url = \"u\"\n  [runners.custom]\n    # graceful_kill_timeout = 30  # note\n    # a note, not an option\n```\n",
			want:   "[[runners]]\n  url = \"u\"\n  [runners.custom]\n    graceful_kill_timeout = 30\n    # a note, not an option\n",
		},
		{name: "no section", readme: "```toml\na = 1\n```\n", err: "no ```toml block"},
		{name: "unterminated", readme: "```toml\n[[runners]]\n", err: "unterminated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readmeRunnersSection(tc.readme)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestREADMERegistrationConfigLoads: the real runner loads the README's
// registration config.toml, every commented option enabled, and runs a
// job with it (podman-executor found on PATH, its config in
// $PODMAN_EXECUTOR_CONFIG), so the README cannot drift from what the
// runner accepts again.
func TestREADMERegistrationConfigLoads(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, err := readmeRunnersSection(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	// The README shows runner-config's output for the path its marker
	// names: the binary under test takes that path's place.
	marker := regexp.MustCompile(`<!-- runner-config: (\S+) -->`).FindStringSubmatch(string(readme))
	if marker == nil {
		t.Fatal("README.md: no <!-- runner-config: PATH --> marker before the registration block")
	}
	section = strings.ReplaceAll(section, marker[1], shared.bin)
	runWithRunnersSection(t, "README.md's registration config.toml (every commented option enabled)", func(r *realRunner) string {
		r.env = append(r.env, "PODMAN_EXECUTOR_CONFIG="+r.driverConf)
		return section
	})
}

// TestRunnerConfigLoads: what `podman-executor runner-config` prints is a
// [[runners]] section the real runner loads and runs a job with.
func TestRunnerConfigLoads(t *testing.T) {
	t.Parallel()
	runWithRunnersSection(t, "podman-executor runner-config", func(r *realRunner) string {
		out, err := exec.Command(shared.bin, "--config", r.driverConf, "runner-config").Output()
		if err != nil {
			t.Fatalf("podman-executor runner-config: %v", err)
		}
		return string(out)
	})
}

// runWithRunnersSection has the real runner load a config.toml made of the
// [[runners]] section that section returns (given the runner, whose
// driverConf and env it may use), its url and token replaced by a fake
// GitLab's, and run one job with it, which must succeed. source says where
// the section comes from, in failure messages.
func runWithRunnersSection(t *testing.T, source string, section func(r *realRunner) string) {
	t.Helper()
	api := startJobsAPI(t)
	r := newRealRunner(t, api, 1, "")
	text := section(r)
	name := regexp.MustCompile(`(?m)^\s*name = "([^"]*)"`).FindStringSubmatch(text)
	if name == nil {
		t.Fatalf("%s: the [[runners]] section has no name:\n%s", source, text)
	}
	r.name = name[1]
	// A placeholder GitLab and token in the section: the fake takes their
	// place.
	text = regexp.MustCompile(`(?m)^(\s*)url = .*$`).ReplaceAllString(text, fmt.Sprintf("${1}url = %q", api.url))
	text = regexp.MustCompile(`(?m)^(\s*)token = .*$`).ReplaceAllString(text, fmt.Sprintf("${1}token = %q", api.token))
	if err := os.WriteFile(r.config, []byte("concurrent = 1\ncheck_interval = 1\n\n"+text), 0o600); err != nil {
		t.Fatal(err)
	}
	shown := strings.ReplaceAll(text, api.token, "<runner token>")

	j := api.newJob(int64(uniqueID(36)), `echo "runners-section-$((6*7))"`)
	api.enqueue(j)
	runnerLog := r.runSingle(1)
	if strings.Contains(runnerLog, "Error loading config") {
		hint := ""
		if strings.Contains(runnerLog, "_kill_timeout") && strings.Contains(runnerLog, "incompatible types") {
			hint = "\n(GitLab Runner reads [runners.custom] graceful_kill_timeout and force_kill_timeout as whole seconds, integers, not duration strings)"
		}
		t.Fatalf("gitlab-runner refuses %s:%s\n\nconfig.toml:\n%s\nrunner log:\n%s", source, hint, shown, runnerLog)
	}
	select {
	case <-j.done:
	case <-time.After(time.Minute):
		t.Fatalf("the runner with %s ran no job:\nconfig.toml:\n%s\nrunner log:\n%s", source, shown, runnerLog)
	}
	if u, log := j.final(); u.State != "success" || !strings.Contains(log, "runners-section-42") {
		t.Errorf("job run with %s: %s:\n%s", source, u.State, log)
	}
	assertJobGone(t, j.payload.ID)
}
