package container

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/containers/podman/v4/pkg/api/handlers"
	"github.com/containers/podman/v4/pkg/bindings"
	"github.com/containers/podman/v4/pkg/bindings/containers"
	"github.com/docker/docker/api/types"
)

// apiVersion is the libpod API version put in exec URLs. The podman 4.3
// services on runner hosts accept it; newer ones do too.
const apiVersion = "v4.0.0"

// Exec runs e.Cmd in the running container name, streams its output as it
// comes, feeds e.Stdin and returns the process's exit code. The error is
// non-nil only when podman itself failed (or ctx ended); a non-zero exit
// code is not an error.
//
// The attach is done here rather than with bindings.ExecStartAndAttach:
// that function reads the stream from the raw socket after net/http has
// buffered the response head (output written at once can be lost), swaps
// the shared connection's transport (unsafe next to a concurrent exec),
// and leaves its stdin goroutine unowned.
func (p *Podman) Exec(ctx context.Context, name string, e Exec) (int, error) {
	c := p.ctx(ctx)
	cfg := &handlers.ExecCreateConfig{ExecConfig: types.ExecConfig{
		AttachStdin:  e.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          e.Cmd,
		Env:          e.Env,
		WorkingDir:   e.WorkDir,
	}}
	id, err := containers.ExecCreate(c, name, cfg)
	if err != nil {
		return 0, fmt.Errorf("create exec in %s: %w", name, notFound(err))
	}
	if err := p.attach(c, id, e); err != nil {
		return 0, fmt.Errorf("exec in %s: %w", name, err)
	}
	return p.execExitCode(c, id)
}

// execExitCode waits for the session to be reported as stopped (its stream
// can end a moment before) and returns its exit code.
func (p *Podman) execExitCode(ctx context.Context, id string) (int, error) {
	for {
		s, err := containers.ExecInspect(ctx, id, nil)
		if err != nil {
			return 0, fmt.Errorf("inspect exec %s: %w", id, err)
		}
		if !s.Running {
			return s.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// attach starts exec session id over a hijacked connection and copies the
// multiplexed stream to e.Stdout / e.Stderr until the process ends.
func (p *Podman) attach(ctx context.Context, id string, e Exec) error {
	bc, err := bindings.GetClient(ctx)
	if err != nil {
		return err
	}
	conn, err := bc.GetDialer(ctx)
	if err != nil {
		return fmt.Errorf("dial podman: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	body, _ := json.Marshal(handlers.ExecStartConfig{})
	req, err := http.NewRequest(http.MethodPost, "http://d/"+apiVersion+"/libpod/exec/"+id+"/start", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("start exec: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fmt.Errorf("start exec: %w", err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSwitchingProtocols {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("start exec: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}

	stdinDone := make(chan struct{})
	if e.Stdin != nil {
		go func() {
			defer close(stdinDone)
			_, _ = io.Copy(conn, e.Stdin)
			if cw, ok := conn.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
		}()
	} else {
		close(stdinDone)
	}
	err = demux(br, e.Stdout, e.Stderr)
	conn.Close() // ends a stdin copy the process never read
	<-stdinDone
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// demux copies podman's multiplexed stream (8-byte header: stream id,
// 3 zero bytes, big-endian length) to stdout and stderr until EOF.
func demux(r io.Reader, stdout, stderr io.Writer) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read exec stream: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		w := io.Discard
		switch hdr[0] {
		case 1:
			w = stdout
		case 2:
			w = stderr
		case 3:
			msg, _ := io.ReadAll(io.LimitReader(r, n))
			return fmt.Errorf("podman: %s", msg)
		}
		if w == nil {
			w = io.Discard
		}
		if _, err := io.CopyN(w, r, n); err != nil {
			return fmt.Errorf("copy exec stream: %w", err)
		}
	}
}
