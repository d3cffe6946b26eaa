// Package channel runs the stages of a job in its container without a
// podman exec per stage: the container's main process is a small sh loop
// that reads stage requests from a FIFO in a host directory bind-mounted
// into the container, runs each script with its output on another FIFO,
// and reports the exit code on a third. A stage then costs a few system
// calls instead of an exec session (an API round trip, conmon and
// `runc exec`), which is most of what a trivial job spends in `run`.
//
// The driver may run as the host's root, and the job must never make it
// write through a link the job planted. So the host directory holds only
// what the driver writes (the request FIFO, the scripts, the output and
// exit-code FIFOs) and is mounted read-only at MountPoint (a process may
// still write into a FIFO on a read-only mount: FIFOs are not files of the
// filesystem's); the loop writes each stage's PID and end into a small
// tmpfs of the container's own at JobMountPoint (see JobTmpfs), so a job
// writes nothing on the host through the channel. Files of the host
// directory are created with O_EXCL|O_NOFOLLOW relative to the directory's
// descriptor and their mode is set through their own descriptor.
//
// It works only where the podman service shares the driver's filesystem
// (a local unix socket, rootful or rootless); elsewhere the executor keeps
// using exec sessions. The driver's directory holds the scripts (which
// carry the job's secrets) while they run, so the channel's parent must be
// private to the driver's user (see Create).
package channel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// MountPoint is where the channel directory is mounted in the container
// (read-only); JobMountPoint is the tmpfs the loop writes to.
const (
	MountPoint    = "/.podman-executor"
	JobMountPoint = "/.podman-executor-job"
)

// JobTmpfs are the options of the tmpfs at JobMountPoint: room for the
// stages' PID and end files only, writable by any user in the container.
const JobTmpfs = "rw,nosuid,nodev,noexec,size=1m,mode=1777"

// ctlName is the request FIFO; the loop holds it open read-write, so a
// writer finds a reader exactly as long as the container runs.
const ctlName = "ctl"

// ErrNotRunning reports that no loop reads the request FIFO: the job
// container is not running (or was not started with Loop).
var ErrNotRunning = errors.New("the job container's stage loop is not running")

// validID is what a stage id may contain: the loop refuses anything else,
// so an id never escapes the directory.
var validID = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Loop is the container's main process, the channel directory mounted at
// d and the loop's tmpfs at j (MountPoint and JobMountPoint, except in
// tests): it
// reads stage ids from the request FIFO and runs each stage in the
// background (bash when the image has it, else sh) with the script on
// stdin and stdout+stderr on the stage's output FIFO; the shell's PID goes
// to j/ID.pid (for stopping a canceled stage) and its exit code to j/ID.end
// and the ID.done FIFO. The FIFOs are opened read-write, which never
// blocks: a stage whose driver died (no reader) does not hang the
// container's side.
func Loop(d, j string) []string {
	return []string{"sh", "-c", `d=` + d + ` j=` + j + `
exec 3<>"$d/` + ctlName + `"
while :; do
	IFS= read -r id <&3 || { sleep 1; continue; }
	case $id in ''|*[!A-Za-z0-9_.-]*) continue ;; esac
	( sh -c 'echo $$ >"$1"; if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh' sh "$j/$id.pid" <"$d/$id.in" 1<>"$d/$id.out" 2>&1
	  c=$?; echo $c >"$j/$id.end"; echo $c 1<>"$d/$id.done" ) 3<&- &
done`}
}

// Create makes the channel directory dir afresh, removing whatever was
// there (an earlier attempt's): dir (0755: the container's users read the
// scripts and open the FIFOs; its parent, which the caller creates 0700,
// keeps other host users out) and its request FIFO (0666). Modes are set
// through descriptors, never by path. Mount dir read-only at MountPoint.
func Create(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("create stage channel: %w", err)
	}
	parent, err := openDir(filepath.Dir(dir))
	if err != nil {
		return fmt.Errorf("create stage channel: %w", err)
	}
	defer unix.Close(parent)
	drv, err := makeDir(parent, filepath.Base(dir), 0o755)
	if err != nil {
		return fmt.Errorf("create stage channel: %w", err)
	}
	defer unix.Close(drv)
	ctl, err := makeFIFO(drv, ctlName)
	if err != nil {
		return fmt.Errorf("create stage channel: %w", err)
	}
	return unix.Close(ctl)
}

// openDir opens a directory that must not be a link.
func openDir(path string) (int, error) {
	return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// makeDir creates the directory name in the directory dfd and returns it
// opened, with mode set through its descriptor (mkdir's mode is cut by
// the umask).
func makeDir(dfd int, name string, mode uint32) (int, error) {
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return -1, fmt.Errorf("mkdir %s: %w", name, err)
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", name, err)
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("chmod %s: %w", name, err)
	}
	return fd, nil
}

// makeFIFO creates the FIFO name in the directory dfd (replacing a
// leftover of an earlier driver of the same stage id: only drivers write
// there), makes it writable by any user in the container through its
// descriptor, and returns its read end, opened without waiting for a
// writer.
func makeFIFO(dfd int, name string) (int, error) {
	err := unix.Mkfifoat(dfd, name, 0o600)
	if errors.Is(err, unix.EEXIST) {
		if err = unix.Unlinkat(dfd, name, 0); err == nil {
			err = unix.Mkfifoat(dfd, name, 0o600)
		}
	}
	if err != nil {
		return -1, fmt.Errorf("mkfifo %s: %w", name, err)
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", name, err)
	}
	if err := unix.Fchmod(fd, 0o666); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("chmod %s: %w", name, err)
	}
	return fd, nil
}

// Exists reports whether dir holds a channel made by Create.
func Exists(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, ctlName))
	return err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

// Ready waits until the loop reads the request FIFO in dir (the
// container's first instants), asking alive between tries whether it is
// worth waiting; it gives up when ctx ends.
func Ready(ctx context.Context, dir string, alive func() error) error {
	ctl := filepath.Join(dir, ctlName)
	for tries := 0; ; tries++ {
		fd, err := unix.Open(ctl, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			return unix.Close(fd)
		}
		if !errors.Is(err, unix.ENXIO) {
			return fmt.Errorf("stage channel: %w", err)
		}
		if tries%50 == 49 && alive != nil {
			if err := alive(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrNotRunning, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// BusyCommand is a command for the container whose channel is mounted at
// d (MountPoint, except in tests) with the loop's tmpfs at j
// (JobMountPoint): it prints "busy" when a stage handed to the loop still
// runs (whether or not its driver is still there): its exit-code FIFO is
// there (the driver removes it when it returns) and the loop has not
// written its end. A job can make it lie about its own container only.
func BusyCommand(d, j string) []string {
	return []string{"sh", "-c", `for f in "` + d + `"/*.done; do [ -e "$f" ] || continue; id=${f##*/}; ` +
		`[ -e "` + j + `/${id%.done}.end" ] || { echo busy; exit 0; }; done`}
}

// PIDFile is the path, inside the container, of the file holding the PID
// of stage id's shell.
func PIDFile(id string) string { return JobMountPoint + "/" + id + ".pid" }

// Stage is one script to run through the channel.
type Stage struct {
	// ID names the stage's files; unique among the job's stages.
	ID     string
	Script io.Reader
	// Out receives the script's stdout and stderr, interleaved as written.
	Out io.Writer
	// Alive is asked, every Check while the stage is silent, whether the
	// container still runs: a stage in a container that died would
	// otherwise wait forever. A non-nil error ends Run with it.
	Alive func() error
	Check time.Duration
}

// Run runs s through the channel in dir and returns the script's exit
// code. The error is non-nil when the channel failed (ErrNotRunning, I/O)
// or ctx ended; the script keeps running then, the caller stops it.
func Run(ctx context.Context, dir string, s Stage) (int, error) {
	if !validID.MatchString(s.ID) {
		return 0, fmt.Errorf("stage id %q: only letters, digits, '.', '_', '-'", s.ID)
	}
	drv, err := openDir(dir)
	if err != nil {
		return 0, fmt.Errorf("stage channel: %w", err)
	}
	defer unix.Close(drv)
	defer func() {
		for _, ext := range []string{".done", ".in", ".out"} {
			_ = unix.Unlinkat(drv, s.ID+ext, 0)
		}
	}()
	if err := writeScript(drv, s.ID+".in", s.Script); err != nil {
		return 0, err
	}
	out, err := makeFIFO(drv, s.ID+".out")
	if err != nil {
		return 0, fmt.Errorf("stage channel: %w", err)
	}
	defer unix.Close(out)
	done, err := makeFIFO(drv, s.ID+".done")
	if err != nil {
		return 0, fmt.Errorf("stage channel: %w", err)
	}
	defer unix.Close(done)
	if err := request(drv, s.ID); err != nil {
		return 0, err
	}
	return wait(ctx, out, done, s)
}

// writeScript copies the script where the loop reads it: a new file
// (replacing a leftover of an earlier driver of the same stage id),
// readable by any user in the container.
func writeScript(dfd int, name string, script io.Reader) error {
	const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dfd, name, flags, 0o600)
	if errors.Is(err, unix.EEXIST) {
		if err = unix.Unlinkat(dfd, name, 0); err == nil {
			fd, err = unix.Openat(dfd, name, flags, 0o600)
		}
	}
	if err != nil {
		return fmt.Errorf("stage channel: create script: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("stage channel: script: %w", err)
	}
	if _, err := io.Copy(f, script); err != nil {
		f.Close()
		return fmt.Errorf("stage channel: write script: %w", err)
	}
	return f.Close()
}

// request hands the stage id to the loop. Opening the request FIFO
// without blocking fails with ENXIO when nothing reads it.
func request(dfd int, id string) error {
	fd, err := unix.Openat(dfd, ctlName, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENXIO) {
		return ErrNotRunning
	}
	if err != nil {
		return fmt.Errorf("stage channel: %w", err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(id+"\n")); err != nil {
		return fmt.Errorf("stage channel: request: %w", err)
	}
	return nil
}

// wait copies the output until the exit code arrives, then what is left
// in the output FIFO, and returns the code.
func wait(ctx context.Context, out, done int, s Stage) (int, error) {
	var abort [2]int
	if err := unix.Pipe2(abort[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return 0, fmt.Errorf("stage channel: %w", err)
	}
	defer unix.Close(abort[0])
	defer unix.Close(abort[1])
	stop := context.AfterFunc(ctx, func() { _, _ = unix.Write(abort[1], []byte{0}) })
	defer stop()

	check := s.Check
	if check <= 0 {
		check = 5 * time.Second
	}
	buf := make([]byte, 32*1024)
	var code []byte
	fds := []unix.PollFd{{Fd: int32(out), Events: unix.POLLIN}, {Fd: int32(done), Events: unix.POLLIN}, {Fd: int32(abort[0]), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(check/time.Millisecond))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("stage channel: poll: %w", err)
		}
		if n == 0 {
			if s.Alive != nil {
				if err := s.Alive(); err != nil {
					return 0, err
				}
			}
			continue
		}
		if fds[2].Revents != 0 {
			return 0, ctx.Err()
		}
		if fds[0].Revents != 0 {
			open, err := copyOut(out, buf, s.Out)
			if err != nil {
				return 0, err
			}
			if !open {
				fds[0].Fd = -1 // every writer is gone; poll ignores it now
			}
		}
		if fds[1].Revents != 0 {
			k, err := unix.Read(done, buf)
			if err != nil && !errors.Is(err, unix.EAGAIN) {
				return 0, fmt.Errorf("stage channel: read exit code: %w", err)
			}
			code = append(code, buf[:max(k, 0)]...)
			if k == 0 { // the loop wrote the code and closed
				if fds[0].Fd >= 0 {
					if _, err := copyOut(out, buf, s.Out); err != nil {
						return 0, err
					}
				}
				c, err := strconv.Atoi(strings.TrimSpace(string(code)))
				if err != nil {
					return 0, fmt.Errorf("stage channel: exit code %q: %w", code, err)
				}
				return c, nil
			}
		}
	}
}

// copyOut copies what the output FIFO holds now. open is false once every
// writer closed it and it is empty.
func copyOut(fd int, buf []byte, w io.Writer) (open bool, err error) {
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return false, fmt.Errorf("stage channel: read output: %w", err)
		case n == 0:
			return false, nil
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return false, fmt.Errorf("stage channel: write output: %w", err)
		}
	}
}
