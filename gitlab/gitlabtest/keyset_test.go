package gitlabtest

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestKeysetPagesAsGitLab: GET /projects with pagination=keyset answers a
// Link header naming the next page by id_after (id_before when sorted
// down), as GitLab's API documentation shows, none on the last page, and
// refuses keyset pagination by another column; offset pages stop at the
// offset pagination limit.
func TestKeysetPagesAsGitLab(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	var ids []int64
	for i := range 5 {
		id, err := s.AddProject(Project{Path: fmt.Sprintf("g/p%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	auth := map[string]string{"PRIVATE-TOKEN": s.Token}
	tests := []struct {
		name, query string
		status      int
		wantNext    string // query values the next link must carry; "" for none
		wantFirst   string // path of the first project of the page
	}{
		{"first page up", "pagination=keyset&order_by=id&sort=asc&per_page=2", 200, fmt.Sprintf("id_after=%d", ids[1]), "g/p0"},
		{"next page up", fmt.Sprintf("pagination=keyset&order_by=id&sort=asc&per_page=2&id_after=%d", ids[1]), 200, fmt.Sprintf("id_after=%d", ids[3]), "g/p2"},
		{"last page", fmt.Sprintf("pagination=keyset&order_by=id&sort=asc&per_page=2&id_after=%d", ids[3]), 200, "", "g/p4"},
		{"down", "pagination=keyset&order_by=id&sort=desc&per_page=3", 200, fmt.Sprintf("id_before=%d", ids[2]), "g/p4"},
		{"other order", "pagination=keyset&order_by=name", 405, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, s, "/projects?"+tt.query, auth)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			link := resp.Header.Get("Link")
			if tt.wantNext == "" {
				if strings.Contains(link, `rel="next"`) {
					t.Errorf("last page has a next link: %s", link)
				}
			} else {
				u, err := url.Parse(strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`))
				if err != nil || !strings.HasSuffix(link, `>; rel="next"`) || u.Path != "/api/v4/projects" ||
					!strings.Contains(u.RawQuery, tt.wantNext) || u.Query().Get("pagination") != "keyset" {
					t.Errorf("next link %q, want one carrying %s", link, tt.wantNext)
				}
			}
			if tt.wantFirst != "" {
				first := body[strings.Index(body, `"path_with_namespace":"`)+len(`"path_with_namespace":"`):]
				if got := first[:strings.Index(first, `"`)]; got != tt.wantFirst {
					t.Errorf("first project %s, want %s", got, tt.wantFirst)
				}
			}
		})
	}

	s.SetOffsetPaginationLimit(4)
	if resp, body := get(t, s, "/projects?page=2&per_page=2", auth); resp.StatusCode != 200 {
		t.Errorf("offset up to the limit: %d %s", resp.StatusCode, body)
	}
	resp, body := get(t, s, "/projects?page=3&per_page=2", auth)
	if want := `{"error":"Offset pagination has a maximum allowed offset of 4 for requests that return objects of type Project. Remaining records can be retrieved using keyset pagination."}`; resp.StatusCode != 405 || strings.TrimSpace(body) != want {
		t.Errorf("offset past the limit: %d %s", resp.StatusCode, body)
	}
}
