module gitlab.com/depsd/depsd/podman-executor

go 1.26.8

require (
	github.com/BurntSushi/toml v1.5.0 // indirect
	github.com/containers/podman/v4 v4.9.5 // indirect
)
