package daemon

import (
	"testing"

	"gitlab.com/depsd/depsd/store/storetest"
)

// The liveness and leader tests run on the backend storetest selects
// (DEPSD_TEST_STORE); the daemon's own end-to-end tests use SQLite files.
func TestMain(m *testing.M) { storetest.Main(m) }
