package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows how far a long command (scan, hooks sync) is, with the
// GitLab request rate and an estimate of the time left: a progress bar on
// a terminal, a log line every interval otherwise (CI, journald). Calls to
// update must not overlap (scan and SyncHooks guarantee it).
type progress struct {
	what     string
	requests func() int64 // the GitLab client's request counter
	now      func() time.Time
	every    time.Duration

	bar *progressbar.ProgressBar // nil: log lines
	w   io.Writer
	log *slog.Logger

	start   time.Time
	req0    int64
	lastLog time.Time
}

// newProgress reports on w (a progress bar if w is a terminal) or log.
func newProgress(what string, w io.Writer, log *slog.Logger, requests func() int64, now func() time.Time) *progress {
	if now == nil {
		now = time.Now
	}
	p := &progress{what: what, requests: requests, now: now, every: 10 * time.Second, log: log, start: now(), req0: requests()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.w = w
	}
	return p
}

// update is the callback of scan.Options.Progress and HookSpec.Progress.
func (p *progress) update(done, total int) {
	now := p.now()
	elapsed := now.Sub(p.start)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(p.requests()-p.req0) / s
	}
	if p.w != nil {
		if p.bar == nil {
			p.bar = progressbar.NewOptions(total,
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(p.what),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionShowElapsedTimeOnFinish(),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
			)
		}
		p.bar.Describe(fmt.Sprintf("%s (%.0f requests/s)", p.what, rate))
		p.bar.Set(done)
		return
	}
	if done != total && done != 0 && now.Sub(p.lastLog) < p.every {
		return
	}
	if done == 0 && total > 0 && p.lastLog.IsZero() {
		p.lastLog = now
		p.log.Info(p.what+" started", "total", total)
		return
	}
	p.lastLog = now
	attrs := []any{"done", done, "total", total, "requests_per_second", fmt.Sprintf("%.1f", rate), "elapsed", elapsed.Round(time.Second)}
	if done > 0 && done < total {
		eta := time.Duration(float64(elapsed) / float64(done) * float64(total-done))
		attrs = append(attrs, "eta", eta.Round(time.Second))
	}
	p.log.Info(p.what+" progress", attrs...)
}

// finish ends the bar, if any.
func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
