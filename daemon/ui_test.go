package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestOpenDashboardWarns: without sign-in, a dashboard listening beyond
// loopback is said at start; on loopback it is not.
func TestOpenDashboardWarns(t *testing.T) {
	for addr, warn := range map[string]bool{
		"0.0.0.0:8080": true, "192.0.2.10:8080": true, "[::]:8080": true,
		"127.0.0.1:8080": false, "[::1]:8080": false, "localhost:8080": false,
	} {
		var buf bytes.Buffer
		d := &Daemon{log: slog.New(slog.NewTextHandler(&buf, nil))}
		d.warnOpenUI(addr)
		if got := strings.Contains(buf.String(), "no sign-in"); got != warn {
			t.Errorf("%s: warned %v, want %v (%s)", addr, got, warn, buf.String())
		}
	}
}
