package store

import (
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/scan"
)

func TestKindOf(t *testing.T) {
	for in, want := range map[string]Kind{
		"depsd.db": KindSQLite, "/var/lib/depsd/state.db": KindSQLite, "postgres.db": KindSQLite,
		"postgres://u@h/db": KindPostgres, "postgresql://u@h/db": KindPostgres, "POSTGRES://u@h/db": KindPostgres,
	} {
		if got := KindOf(in); got != want {
			t.Errorf("KindOf(%q) = %s, want %s", in, got, want)
		}
	}
}

// A URL that cannot be reached fails Open with a message that names the
// database but never its password.
func TestOpenPostgresErrorsHideThePassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://depsd:s3cr3t-pw@127.0.0.1:1/nowhere?connect_timeout=2",
		"postgresql://depsd@127.0.0.1:1/nowhere?password=s3cr3t-pw&connect_timeout=2",
	} {
		s, err := Open(t.Context(), dsn)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%s) succeeded", dsn)
		}
		if strings.Contains(err.Error(), "s3cr3t-pw") {
			t.Errorf("error leaks the password: %v", err)
		}
		if !strings.Contains(err.Error(), "127.0.0.1:1/nowhere") {
			t.Errorf("error should name the database: %v", err)
		}
	}
}

// Paths sort bytewise on both backends, whatever the database's locale.
func TestProjectsSortBytewise(t *testing.T) { forEachBackend(t, testProjectsSortBytewise) }

func testProjectsSortBytewise(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ps := []scan.Project{{ID: 1, Path: "a-b/x"}, {ID: 2, Path: "a/b"}, {ID: 3, Path: "A/c"}, {ID: 4, Path: "a_b/y"}, {ID: 5, Path: "ab/z"}}
	if err := s.ApplyScan(t.Context(), ps, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Projects(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, p := range got {
		paths = append(paths, p.Path)
	}
	if want := "A/c a-b/x a/b a_b/y ab/z"; strings.Join(paths, " ") != want {
		t.Errorf("order %v, want %s", paths, want)
	}
}
