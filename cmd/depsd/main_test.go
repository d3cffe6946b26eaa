package main

import (
	"testing"

	"gitlab.com/depsd/depsd/store/pgtest"
)

// TestMain stops the PostgreSQL server the tests of a postgres:// state
// start (pgtest), once they are done.
func TestMain(m *testing.M) { pgtest.Main(m) }
