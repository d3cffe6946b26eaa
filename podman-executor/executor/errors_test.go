package executor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExitCode(t *testing.T) {
	codes := ExitCodes{BuildFailure: 11, SystemFailure: 22}
	tests := []struct {
		name     string
		err      error
		want     int
		wantFile string
		wantLog  string
	}{
		{name: "success", want: 0},
		{name: "script failure", err: fmt.Errorf("run: %w", &BuildError{Code: 3}), want: 11, wantFile: "3"},
		{name: "job definition", err: &JobError{Msg: "image not allowed"}, want: 11, wantLog: "image not allowed"},
		{name: "podman", err: errors.New("connect to podman:\n refused"), want: 22, wantLog: "ERROR: podman-executor: connect to podman: refused\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := codes
			c.File = filepath.Join(t.TempDir(), "code")
			var log bytes.Buffer
			if got := ExitCode(tt.err, c, &log); got != tt.want {
				t.Errorf("exit %d, want %d", got, tt.want)
			}
			b, _ := os.ReadFile(c.File)
			if string(b) != tt.wantFile {
				t.Errorf("file %q, want %q", b, tt.wantFile)
			}
			if !strings.Contains(log.String(), tt.wantLog) {
				t.Errorf("log %q lacks %q", log.String(), tt.wantLog)
			}
		})
	}
}

func TestGuardTurnsPanicIntoOneLine(t *testing.T) {
	err := Guard("prepare", func() error {
		var m map[string]int
		m["x"] = 1
		return nil
	})
	var log bytes.Buffer
	if code := ExitCode(err, ExitCodes{BuildFailure: 1, SystemFailure: 2}, &log); code != 2 {
		t.Errorf("exit %d", code)
	}
	if strings.Count(log.String(), "\n") != 1 || !strings.Contains(log.String(), "internal error in prepare stage") || strings.Contains(log.String(), "goroutine") {
		t.Errorf("log %q", log.String())
	}
}

func TestParseJob(t *testing.T) {
	resp := filepath.Join(t.TempDir(), "job.json")
	payload := `{"services":[{"name":"redis:7","alias":"cache","variables":[{"key":"REDIS_ARGS","value":"--save ''"}]}]}`
	if err := os.WriteFile(resp, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := ParseJob([]string{
		"CUSTOM_ENV_CI_JOB_SERVICES=[{\"name\":\"redis:7\",\"alias\":\"cache\"}]",
		"CUSTOM_ENV_CI_JOB_ID=5", "JOB_RESPONSE_FILE=" + resp, "PATH=/bin",
		"BUILD_FAILURE_EXIT_CODE=9", "SYSTEM_FAILURE_EXIT_CODE=8", "BUILD_EXIT_CODE_FILE=/x",
	})
	if err != nil {
		t.Fatal(err)
	}
	if j.Vars["CI_JOB_ID"] != "5" || j.Driver["PATH"] != "/bin" || j.Codes != (ExitCodes{9, 8, "/x"}) {
		t.Errorf("job %+v", j)
	}
	s, err := j.Services()
	if err != nil || len(s) != 1 || s[0].Variables["REDIS_ARGS"] != "--save ''" {
		t.Errorf("services %+v, %v", s, err)
	}
	if _, err := ParseJob([]string{"JOB_RESPONSE_FILE=/does/not/exist"}); err == nil {
		t.Error("missing job response file: no error")
	}
}
