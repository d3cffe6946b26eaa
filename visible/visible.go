// Package visible is what one person may see of depsd's views: the one
// filter every page of the dashboard and every GET of the HTTP API reads
// through, so that a view cannot forget it.
//
// A person sees the projects GitLab lets them read (signin). Of the rest:
//   - a project, its page, its images and its schedules are absent (as if
//     not in scope);
//   - a chain through hidden projects shows those members as "hidden-N",
//     with their state only, never their names, pipelines or reasons; a
//     chain with no member the person may see is absent;
//   - the graph is that of the projects the person may see (what their own
//     Containerfiles name of the others is theirs to see);
//   - counts count only what the person may see;
//   - every free text (a member's reason, a verdict, an image reference)
//     has the paths of hidden projects replaced by "(hidden)";
//   - what depsd wrote to a hidden project (moving its pins) is left out
//     of a chain's writes.
//
// Node keys (docs/design/nodes.md) are seen by their project's path
// (deps.NodeProject).
package visible

import (
	"slices"
	"strconv"
	"strings"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/verify"
)

// Hidden is what a free text says instead of a hidden project's path.
const Hidden = "(hidden)"

// Scope is what one person may see. The nil *Scope, like All(), sees
// everything (sign-in off).
type Scope struct {
	sees  func(path string) bool
	known func(path string) bool
}

// All sees everything.
func All() *Scope { return nil }

// For is the scope of a person who sees the project paths sees reports;
// known reports the projects depsd knows (in the graph), whose paths are
// taken out of free texts when the person may not see them.
func For(sees, known func(path string) bool) *Scope {
	if known == nil {
		known = func(string) bool { return false }
	}
	return &Scope{sees: sees, known: known}
}

// Everything reports whether the scope sees everything.
func (s *Scope) Everything() bool { return s == nil }

// Sees reports whether the person may see the project of key (a path or a
// node key).
func (s *Scope) Sees(key string) bool {
	return s == nil || s.sees(deps.NodeProject(key))
}

// pathChar reports whether c may be part of a project path.
func pathChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/'
}

// Text replaces, in a free text, the path of every project depsd knows
// and the person may not see by Hidden: a word made of path characters
// that is such a path, or ends in "/" and one (an image reference's
// repository under its registry host).
func (s *Scope) Text(t string) string {
	if s == nil || t == "" {
		return t
	}
	var b strings.Builder
	changed := false
	for i := 0; i < len(t); {
		if !pathChar(t[i]) {
			b.WriteByte(t[i])
			i++
			continue
		}
		j := i
		for j < len(t) && pathChar(t[j]) {
			j++
		}
		word := t[i:j]
		if at := s.hiddenSuffix(word); at >= 0 {
			b.WriteString(word[:at])
			b.WriteString(Hidden)
			changed = true
		} else {
			b.WriteString(word)
		}
		i = j
	}
	if !changed {
		return t
	}
	return b.String()
}

// hiddenSuffix is where, in word, a hidden project's path starts (the
// whole word, or after a '/'); -1 when none.
func (s *Scope) hiddenSuffix(word string) int {
	hidden := func(p string) bool { return p != "" && s.known(p) && !s.sees(p) }
	if hidden(word) {
		return 0
	}
	for i := 0; i < len(word); i++ {
		if word[i] == '/' && hidden(word[i+1:]) {
			return i + 1
		}
	}
	return -1
}

// Projects keeps the projects the person may see.
func (s *Scope) Projects(ps []scan.Project) []scan.Project {
	if s == nil {
		return ps
	}
	return slices.DeleteFunc(slices.Clone(ps), func(p scan.Project) bool { return !s.Sees(p.Path) })
}

// Chain is the chain as the person may see it; ok is false when it has
// no member they may see (a merged chain, which has none: when none of
// its roots is theirs).
func (s *Scope) Chain(c chain.ChainView) (chain.ChainView, bool) {
	if s == nil {
		return c, true
	}
	any := false
	for _, m := range c.Members {
		any = any || s.Sees(m.Project)
	}
	if len(c.Members) == 0 {
		for _, r := range c.Roots {
			any = any || s.Sees(r)
		}
	}
	if !any {
		return chain.ChainView{}, false
	}
	label := map[string]string{}
	name := func(p string) string {
		if s.Sees(p) {
			return p
		}
		if l, ok := label[p]; ok {
			return l
		}
		l := "hidden-" + strconv.Itoa(len(label)+1)
		label[p] = l
		return l
	}
	// Hidden members are numbered in the chain's order of members as
	// listed (by path); their labels say nothing more.
	out := c
	out.Members = make([]chain.MemberView, 0, len(c.Members))
	for _, m := range c.Members {
		v := m
		ups := make([]string, len(m.Upstreams))
		for i, u := range m.Upstreams {
			ups[i] = name(u)
		}
		v.Upstreams = ups
		if s.Sees(m.Project) {
			v.Why, v.VerifyDetail = s.Text(m.Why), s.Text(m.VerifyDetail)
			if m.Pinned != nil {
				v.Pinned = make([]string, len(m.Pinned))
				for i, u := range m.Pinned {
					v.Pinned[i] = name(u)
				}
			}
		} else {
			v = chain.MemberView{Project: name(m.Project), Hidden: true, State: m.State, Upstreams: ups,
				Requeued: m.Requeued, Builds: m.Builds}
		}
		out.Members = append(out.Members, v)
	}
	out.Roots = make([]string, 0, len(c.Roots))
	for _, r := range c.Roots {
		out.Roots = append(out.Roots, name(r))
	}
	out.Reasons = make([]chain.Reason, 0, len(c.Reasons))
	for _, r := range c.Reasons {
		if !s.Sees(r.Project) {
			r.Project, r.PipelineID = name(r.Project), 0
		}
		r.Detail = s.Text(r.Detail)
		out.Reasons = append(out.Reasons, r)
	}
	out.Skipped = nil
	for _, sk := range c.Skipped {
		if s.Sees(sk.Project) {
			sk.Why = s.Text(sk.Why)
			out.Skipped = append(out.Skipped, sk)
		}
	}
	// What depsd wrote to GitLab: only to the projects the person sees.
	out.Writes = nil
	for _, w := range c.Writes {
		if s.Sees(w.Project) {
			w.Detail = s.Text(w.Detail)
			out.Writes = append(out.Writes, w)
		}
	}
	return out, true
}

// Validation is a merge request's validation as the person may see it;
// ok is false unless they may see the upstream whose merge request it is.
// Its validation chain shows its members as Chain does; its summary and
// error say no hidden path, and the cleanup lists only their projects'
// tags.
func (s *Scope) Validation(v chain.ValidationView) (chain.ValidationView, bool) {
	if s == nil {
		return v, true
	}
	if !s.Sees(v.Project) {
		return chain.ValidationView{}, false
	}
	out := v
	out.Summary, out.Error = s.Text(v.Summary), s.Text(v.Error)
	if v.Chain != nil {
		c, _ := s.Chain(*v.Chain)
		out.Chain = &c
	}
	out.Cleanup = nil
	for _, tc := range v.Cleanup {
		if s.Sees(tc.Project) {
			out.Cleanup = append(out.Cleanup, tc)
		}
	}
	return out, true
}

// Validations keeps the validations the person may see, as they may see
// them.
func (s *Scope) Validations(vs []chain.ValidationView) []chain.ValidationView {
	if s == nil {
		return vs
	}
	out := make([]chain.ValidationView, 0, len(vs))
	for _, v := range vs {
		if w, ok := s.Validation(v); ok {
			out = append(out, w)
		}
	}
	return out
}

// Chains keeps the chains the person may see, as they may see them.
func (s *Scope) Chains(cs []chain.ChainView) []chain.ChainView {
	if s == nil {
		return cs
	}
	out := make([]chain.ChainView, 0, len(cs))
	for _, c := range cs {
		if v, ok := s.Chain(c); ok {
			out = append(out, v)
		}
	}
	return out
}

// Stats counts, in the chains the person may see (active ones, as the
// engine's Stats lists them), what stats counts: active and blocked
// chains, and pending and verifying members for the queues. The inbox's
// unprocessed events name no project and are kept.
func (s *Scope) Stats(all chain.Stats, active []chain.ChainView) chain.Stats {
	if s == nil {
		return all
	}
	out := chain.Stats{UnprocessedEvts: all.UnprocessedEvts}
	for _, c := range s.Chains(active) {
		if !c.State.Active() {
			continue
		}
		out.ActiveChains++
		if c.State == chain.Blocked {
			out.BlockedChains++
			if out.BlockedSince.IsZero() || c.Updated.Before(out.BlockedSince) {
				out.BlockedSince = c.Updated
			}
		}
		for _, m := range c.Members {
			if m.Hidden {
				continue
			}
			if out.Members == nil {
				out.Members = map[chain.MemberState]int{}
			}
			out.Members[m.State]++
			switch m.State {
			case chain.Pending:
				out.PendingActions++
			case chain.Verifying:
				out.VerifyQueued++
			}
		}
	}
	return out
}

// Rows keeps the freshness rows of the projects the person may see, with
// hidden projects' paths taken out of their texts.
func (s *Scope) Rows(rows []verify.Row) []verify.Row {
	if s == nil {
		return rows
	}
	out := make([]verify.Row, 0, len(rows))
	for _, r := range rows {
		if !s.Sees(r.Project) {
			continue
		}
		r.Detail = s.Text(r.Detail)
		ups := make([]verify.Verdict, len(r.Upstreams))
		for i, u := range r.Upstreams {
			u.Upstream = s.Text(u.Upstream)
			ups[i] = u
		}
		r.Upstreams = ups
		if r.Fix != nil {
			f := *r.Fix
			if f.Project != "" && !s.Sees(f.Project) {
				f.Project = Hidden
			}
			f.Image, f.Detail = s.Text(f.Image), s.Text(f.Detail)
			r.Fix = &f
		}
		out = append(out, r)
	}
	return out
}

// Entries keeps the schedules of the projects the person may see, the
// jobs, and the watched images with the projects they rebuild that the
// person may see (an image reference naming a hidden project is taken
// out).
func (s *Scope) Entries(es []scheduler.Entry) []scheduler.Entry {
	if s == nil {
		return es
	}
	out := make([]scheduler.Entry, 0, len(es))
	for _, e := range es {
		switch e.Kind {
		case scheduler.KindRebuild:
			if !s.Sees(e.Target) {
				continue
			}
		case scheduler.KindWatch:
			e.Target = s.Text(e.Target)
			e.Projects = slices.DeleteFunc(slices.Clone(e.Projects), func(p string) bool { return !s.Sees(p) })
		}
		e.LastOutcome, e.Err = s.Text(e.LastOutcome), s.Text(e.Err)
		out = append(out, e)
	}
	return out
}

// Audit keeps the audit entries about what the person may see: an action
// on a member or project they may see, or on a chain they may see
// (chains reports which).
func (s *Scope) Audit(es []chain.AuditEntry, chains func(id int64) bool) []chain.AuditEntry {
	if s == nil {
		return es
	}
	out := make([]chain.AuditEntry, 0, len(es))
	for _, e := range es {
		if e.Target != "" && !s.Sees(e.Target) || e.Target == "" && !chains(e.ChainID) {
			continue
		}
		e.Reason, e.Outcome = s.Text(e.Reason), s.Text(e.Outcome)
		out = append(out, e)
	}
	return out
}

// Set is a set of project paths, for For.
func Set(paths []string) func(string) bool {
	m := make(map[string]bool, len(paths))
	for _, p := range paths {
		m[p] = true
	}
	return func(p string) bool { return m[p] }
}
