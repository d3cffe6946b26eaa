package scheduler

import (
	"strings"
	"testing"
	"time"
)

func zurich(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Zurich")
	if err != nil {
		t.Skipf("no tz database for Europe/Zurich: %v", err)
	}
	return loc
}

// fires returns the next n fire times after from, in loc.
func fires(t *testing.T, expr, tz string, from time.Time, n int, loc *time.Location) []string {
	t.Helper()
	sp, err := parseSpec(expr, tz)
	if err != nil {
		t.Fatalf("parseSpec(%q, %q): %v", expr, tz, err)
	}
	var out []string
	for range n {
		from = sp.sched.Next(from)
		out = append(out, from.In(loc).Format("2006-01-02 15:04 MST"))
	}
	return out
}

// An operator's "30 2 * * *" in Zurich runs once every day, also on the
// two days a year the clocks change: at 03:00 when 02:30 does not exist,
// and only at the first 02:30 when it happens twice.
func TestDailyJobAcrossDST(t *testing.T) {
	z := zurich(t)
	tests := []struct {
		name, expr, tz string
		from           time.Time
		want           []string
	}{
		{"spring forward", "30 2 * * *", "Europe/Zurich", time.Date(2025, 3, 28, 12, 0, 0, 0, z),
			[]string{"2025-03-29 02:30 CET", "2025-03-30 03:00 CEST", "2025-03-31 02:30 CEST", "2025-04-01 02:30 CEST"}},
		{"fall back", "30 2 * * *", "Europe/Zurich", time.Date(2025, 10, 24, 12, 0, 0, 0, z),
			[]string{"2025-10-25 02:30 CEST", "2025-10-26 02:30 CEST", "2025-10-27 02:30 CET", "2025-10-28 02:30 CET"}},
		{"prefix instead of field", "CRON_TZ=Europe/Zurich 30 2 * * *", "", time.Date(2025, 3, 29, 12, 0, 0, 0, z),
			[]string{"2025-03-30 03:00 CEST", "2025-03-31 02:30 CEST"}},
		{"TZ prefix", "TZ=Europe/Zurich 30 2 * * *", "", time.Date(2025, 10, 25, 12, 0, 0, 0, z),
			[]string{"2025-10-26 02:30 CEST", "2025-10-27 02:30 CET"}},
		// A job every hour keeps every real hour, both 02:30s included.
		{"hourly on fall back", "30 * * * *", "Europe/Zurich", time.Date(2025, 10, 26, 1, 0, 0, 0, z),
			[]string{"2025-10-26 01:30 CEST", "2025-10-26 02:30 CEST", "2025-10-26 02:30 CET", "2025-10-26 03:30 CET"}},
		{"hourly on spring forward", "30 * * * *", "Europe/Zurich", time.Date(2025, 3, 30, 1, 0, 0, 0, z),
			[]string{"2025-03-30 01:30 CET", "2025-03-30 03:30 CEST"}},
		{"weekly, default UTC", "0 3 * * 1", "", time.Date(2025, 3, 28, 0, 0, 0, 0, time.UTC),
			[]string{"2025-03-31 03:00 UTC", "2025-04-07 03:00 UTC"}},
		{"descriptor in a timezone", "@daily", "Europe/Zurich", time.Date(2025, 3, 29, 12, 0, 0, 0, z),
			[]string{"2025-03-30 00:00 CET", "2025-03-31 00:00 CEST"}},
		{"every", "@every 6h", "", time.Date(2025, 3, 29, 12, 0, 0, 0, time.UTC),
			[]string{"2025-03-29 18:00 UTC", "2025-03-30 00:00 UTC"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := z
			if tt.tz == "" && !strings.Contains(tt.expr, "TZ=") {
				loc = time.UTC
			}
			got := fires(t, tt.expr, tt.tz, tt.from, len(tt.want), loc)
			if strings.Join(got, ", ") != strings.Join(tt.want, ", ") {
				t.Errorf("fires\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestLatestDue(t *testing.T) {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		expr     string
		cursor   time.Time
		now      time.Time
		wantLast time.Time
		wantN    int
	}{
		{"0 3 * * *", base, base.Add(2 * time.Hour), time.Time{}, 0},
		{"0 3 * * *", base, base.Add(3 * time.Hour), base.Add(3 * time.Hour), 1},
		{"0 3 * * *", base, base.Add(75 * time.Hour), base.Add(75 * time.Hour), 4},
		{"@every 6h", base, base.Add(5 * time.Hour), time.Time{}, 0},
		{"@every 6h", base, base.Add(13 * time.Hour), base.Add(12 * time.Hour), 2},
		{"@every 6h", base.Add(500 * time.Millisecond), base.Add(6 * time.Hour), base.Add(6 * time.Hour), 1},
	}
	for _, tt := range tests {
		sp, err := parseSpec(tt.expr, "")
		if err != nil {
			t.Fatal(err)
		}
		last, n := latestDue(sp.sched, tt.cursor, tt.now)
		if !last.Equal(tt.wantLast) || n != tt.wantN {
			t.Errorf("latestDue(%q, %s, %s) = %s, %d; want %s, %d", tt.expr, tt.cursor, tt.now, last, n, tt.wantLast, tt.wantN)
		}
	}
}

// Every bad entry is reported, each naming where it is, so the operator
// fixes the file in one go.
func TestValidateNamesTheEntry(t *testing.T) {
	inScope := func(p string) bool { return strings.HasPrefix(p, "infra/") }
	cfg := Config{
		Schedules: []ScheduleSpec{
			{Project: "infra/ok", Cron: "@daily"},
			{Project: "infra/base", Cron: "0 3 * *"},
			{Project: "infra/tz", Cron: "0 3 * * *", Timezone: "Europe/Zurch"},
			{Project: "other/app", Cron: "@daily"},
			{Cron: "@daily"},
			{Project: "infra/prefix", Cron: "CRON_TZ=Mars/Olympus 0 3 * * *"},
			{Project: "infra/both", Cron: "CRON_TZ=UTC 0 3 * * *", Timezone: "Europe/Zurich"},
			{Project: "infra/fast", Cron: "@every 5s"},
			{Project: "infra/ok", Cron: "@daily", Timezone: "UTC"},
		},
		CatchUp:       "sometimes",
		Rescan:        "@every 6",
		WatchInterval: 10 * time.Second,
		Watch: []WatchSpec{
			{Image: "debian@sha256:" + strings.Repeat("a", 64)},
			{Image: "Not A Ref"},
			{Image: "debian:12", Projects: []string{"elsewhere/x"}},
			{Image: "docker.io/library/debian:12"},
		},
	}
	err := cfg.Validate(inScope)
	if err == nil {
		t.Fatal("Validate accepted a bad configuration")
	}
	want := []string{
		`schedules[1] (infra/base): bad cron expression "0 3 * *": expected exactly 5 fields, found 4`,
		`schedules[2] (infra/tz): unknown timezone "Europe/Zurch"`,
		`schedules[3] (other/app): project is not in the scope`,
		`schedules[4]: project is empty`,
		`schedules[5] (infra/prefix): unknown timezone "Mars/Olympus"`,
		`schedules[6] (infra/both): timezone "Europe/Zurich" contradicts the CRON_TZ=UTC prefix`,
		`schedules[7] (infra/fast): bad cron expression "@every 5s": interval under 1m0s`,
		`schedules[8] (infra/ok): same schedule as schedules[0]`,
		`catch_up "sometimes": want once or skip`,
		`rescan: bad cron expression "@every 6"`,
		`watch_interval 10s: want at least 1m0s`,
		`watch[0] (debian@sha256:aaaa`,
		`pinned by digest`,
		`watch[1] (Not A Ref): invalid image reference`,
		`watch[2] (debian:12): project elsewhere/x is not in the scope`,
		`watch[3] (docker.io/library/debian:12): same image as watch[2]`,
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q; got:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "schedules[0]:") || strings.Contains(err.Error(), "schedules[0] (infra/ok):") {
		t.Errorf("error mentions the good entry:\n%v", err)
	}
	if err := (Config{}).Validate(nil); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	if err := (Config{Rescan: "off", Schedules: []ScheduleSpec{{Project: "a/b", Cron: "0 3 * * 1", Timezone: "Europe/Zurich"}}}).Validate(nil); err != nil {
		t.Errorf("good Config: %v", err)
	}
}
