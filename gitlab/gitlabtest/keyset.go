package gitlabtest

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// DefaultOffsetPaginationLimit is GitLab's offset_pagination_limit plan
// limit: offset pagination of a listing that supports keyset pagination
// (GET /projects) is refused past it.
const DefaultOffsetPaginationLimit = 50000

// SetOffsetPaginationLimit changes the offset pagination limit of GET
// /projects (GitLab's plan limit offset_pagination_limit; 0 restores
// 50,000, negative removes it), so a test can reach it with fewer projects.
func (s *Server) SetOffsetPaginationLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == 0 {
		n = DefaultOffsetPaginationLimit
	}
	s.offsetLimit = n
}

// listProjects answers GET /projects: every project of the instance (the
// fake's one user sees them all), with archived, order_by and sort, and
// either pagination GitLab offers:
//
//   - offset (page, per_page), refused as GitLab refuses it past the
//     offset pagination limit (Gitlab::Pagination offset_paginator: when
//     page × per_page exceeds it): 405 {"error":"Offset pagination has a
//     maximum allowed offset of 50000 for requests that return objects of
//     type Project. Remaining records can be retrieved using keyset
//     pagination."};
//   - keyset (pagination=keyset, order_by=id, sort asc or desc, per_page
//     at most 100): a Link header with rel="next" naming id_after (or
//     id_before) while more remain, as GitLab documents; keyset with
//     another order is refused with 405 as on GitLab.
func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	orderBy := q.Get("order_by")
	if q.Get("pagination") != "keyset" {
		var list []*project
		keep := s.projectFilter(r) // the caller's (users.go)
		for _, p := range s.inst.projects {
			if a := q.Get("archived"); a != "" && (a == "true") != p.archived || keep != nil && !keep(p) {
				continue
			}
			list = append(list, p)
		}
		perPage, err := strconv.Atoi(q.Get("per_page"))
		if err != nil || perPage < 1 {
			perPage = 20
		}
		page, err := strconv.Atoi(q.Get("page"))
		if err != nil || page < 1 {
			page = 1
		}
		if s.offsetLimit > 0 && page*min(perPage, 100) > s.offsetLimit {
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf(
				"Offset pagination has a maximum allowed offset of %d for requests that return objects of type Project. "+
					"Remaining records can be retrieved using keyset pagination.", s.offsetLimit)})
			return
		}
		sortProjects(list, orderBy, q.Get("sort"))
		s.writeProjects(w, q, paginate(s, w, r, list))
		return
	}
	if orderBy != "" && orderBy != "id" {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "Keyset pagination is not yet available for this type of request"})
		return
	}
	desc := q.Get("sort") != "asc"
	perPage, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || perPage < 1 {
		perPage = 20
	}
	perPage = min(perPage, 100)
	// From the cursor on, in id order, up to a page of those that pass
	// the filters, and whether any is left after it.
	all := s.inst.sortedProjects()
	archived := q.Get("archived")
	filter := s.projectFilter(r) // the caller's (users.go)
	keep := func(p *project) bool {
		return (archived == "" || (archived == "true") == p.archived) && (filter == nil || filter(p))
	}
	var list []*project
	more := false
	if desc {
		i := len(all) - 1
		if before, err := strconv.ParseInt(q.Get("id_before"), 10, 64); err == nil {
			i, _ = slices.BinarySearchFunc(all, before, func(p *project, id int64) int { return cmp.Compare(p.id, id) })
			i--
		}
		for ; i >= 0; i-- {
			if keep(all[i]) {
				if len(list) == perPage {
					more = true
					break
				}
				list = append(list, all[i])
			}
		}
	} else {
		i := 0
		if after, err := strconv.ParseInt(q.Get("id_after"), 10, 64); err == nil {
			i, _ = slices.BinarySearchFunc(all, after+1, func(p *project, id int64) int { return cmp.Compare(p.id, id) })
		}
		for ; i < len(all); i++ {
			if keep(all[i]) {
				if len(list) == perPage {
					more = true
					break
				}
				list = append(list, all[i])
			}
		}
	}
	page := list
	if more {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Del("id_after")
		next.Del("id_before")
		last := strconv.FormatInt(page[len(page)-1].id, 10)
		if desc {
			next.Set("id_before", last)
		} else {
			next.Set("id_after", last)
		}
		next.Set("per_page", strconv.Itoa(perPage))
		w.Header().Set("Link", fmt.Sprintf(`<%s%s?%s>; rel="next"`, s.URL, r.URL.EscapedPath(), next.Encode()))
	}
	s.writeProjects(w, q, page)
}

func (s *Server) writeProjects(w http.ResponseWriter, q url.Values, page []*project) {
	if q.Get("simple") == "true" {
		out := make([]simpleProjectJSON, 0, len(page))
		for _, p := range page {
			out = append(out, s.simpleProject(p))
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	out := make([]projectJSON, 0, len(page))
	for _, p := range page {
		out = append(out, s.fullProject(p))
	}
	writeJSON(w, http.StatusOK, out)
}
