package executor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// BuildError is a job script that exited non-zero: the job failed, the
// infrastructure did not.
type BuildError struct{ Code int }

func (e *BuildError) Error() string { return fmt.Sprintf("script exited with code %d", e.Code) }

// ErrCanceled reports a stage stopped by the runner (cancel or timeout).
var ErrCanceled = errors.New("stage canceled")

// ExitCode maps a stage's outcome to the runner's contract: 0, the build
// failure code (writing the script's code to the exit-code file) or the
// system failure code, printing a one-line reason on w (the job log).
func ExitCode(err error, codes ExitCodes, w io.Writer) int {
	if err == nil {
		return 0
	}
	var je *JobError
	if errors.As(err, &je) {
		fmt.Fprintf(w, "ERROR: podman-executor: %s\n", oneLine(je.Msg))
		return codes.BuildFailure
	}
	var be *BuildError
	if errors.As(err, &be) {
		if codes.File != "" {
			if werr := os.WriteFile(codes.File, []byte(strconv.Itoa(be.Code)), 0o644); werr != nil {
				fmt.Fprintf(w, "ERROR: podman-executor: write exit code file: %v\n", werr)
				return codes.SystemFailure
			}
		}
		return codes.BuildFailure
	}
	fmt.Fprintf(w, "ERROR: podman-executor: %s\n", oneLine(err.Error()))
	return codes.SystemFailure
}

// Guard runs a stage and turns a panic into an error, so the job log shows
// one line instead of a goroutine dump and the runner sees a system
// failure.
func Guard(stage string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error in %s stage: %v", stage, r)
		}
	}()
	return f()
}

// oneLine folds a multi-line message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// JobError is a failure caused by the job's own definition (an image the
// driver does not allow, a malformed services list): retrying cannot
// help, so prepare reports it as a build failure, without an exit code.
type JobError struct{ Msg string }

func (e *JobError) Error() string { return e.Msg }
