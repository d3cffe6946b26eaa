package executor

import (
	"encoding/json"
	"fmt"
	"io"
)

// ConfigOutput is the JSON the config stage prints for the runner.
type ConfigOutput struct {
	BuildsDir         string            `json:"builds_dir"`
	CacheDir          string            `json:"cache_dir"`
	BuildsDirIsShared bool              `json:"builds_dir_is_shared"`
	Hostname          string            `json:"hostname"`
	Driver            DriverInfo        `json:"driver"`
	JobEnv            map[string]string `json:"job_env"`
}

// DriverInfo names the driver in the runner's job log.
type DriverInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ConfigStage writes the config JSON to stdout, and nothing else: the
// runner parses all of stdout. It needs no podman: the builds and cache
// dirs are paths inside the job container, which is not shared.
func (e *Executor) ConfigStage(stdout io.Writer) error {
	id, err := e.identity()
	if err != nil {
		return err
	}
	out := ConfigOutput{
		BuildsDir: e.Config.BuildsDir,
		CacheDir:  e.Config.CacheDir,
		Hostname:  id.JobName(),
		Driver:    DriverInfo{Name: Name, Version: Version},
		JobEnv:    map[string]string{"PODMAN_EXECUTOR_CONTAINER": id.JobName()},
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}
