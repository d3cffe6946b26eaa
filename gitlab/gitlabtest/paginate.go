package gitlabtest

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxCountedRecords is where GitLab stops counting: past it, X-Total and
// X-Total-Pages are omitted (and so is the rel="last" link).
const maxCountedRecords = 10000

// SetCountLimit changes where the fake stops counting a listing (GitLab:
// 10,000 records; 0 restores it), so a test reaches an uncounted listing
// with few projects.
func (s *Server) SetCountLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countLimit = cmp.Or(n, maxCountedRecords)
}

// paginate answers offset pagination the way GitLab does: page and per_page
// (default 20, at most 100), X-Page, X-Per-Page, X-Total, X-Total-Pages,
// X-Next-Page and X-Prev-Page (present but empty at the ends), and a Link
// header. It returns the items of the requested page.
func paginate[T any](s *Server, w http.ResponseWriter, r *http.Request, items []T) []T {
	q := r.URL.Query()
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	perPage, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || perPage < 1 {
		perPage = 20
	}
	perPage = min(perPage, 100)
	total := len(items)
	pages := max(1, (total+perPage-1)/perPage)

	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(perPage))
	next, prev := "", ""
	if page < pages {
		next = strconv.Itoa(page + 1)
	}
	if page > 1 {
		prev = strconv.Itoa(min(page-1, pages))
	}
	h.Set("X-Next-Page", next)
	h.Set("X-Prev-Page", prev)
	counted := total <= s.countLimit
	if counted {
		h.Set("X-Total", strconv.Itoa(total))
		h.Set("X-Total-Pages", strconv.Itoa(pages))
	}

	link := func(p int, rel string) string {
		u := url.URL{Path: r.URL.EscapedPath()}
		qq := url.Values{}
		for k, v := range q {
			qq[k] = v
		}
		qq.Set("page", strconv.Itoa(p))
		qq.Set("per_page", strconv.Itoa(perPage))
		return fmt.Sprintf(`<%s%s?%s>; rel="%s"`, s.URL, u.Path, qq.Encode(), rel)
	}
	var links []string
	if prev != "" {
		links = append(links, link(page-1, "prev"))
	}
	if next != "" {
		links = append(links, link(page+1, "next"))
	}
	links = append(links, link(1, "first"))
	if counted {
		links = append(links, link(pages, "last"))
	}
	h.Set("Link", strings.Join(links, ", "))

	start := (page - 1) * perPage
	if start >= total {
		return []T{}
	}
	return items[start:min(start+perPage, total)]
}
