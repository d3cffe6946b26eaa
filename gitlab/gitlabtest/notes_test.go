package gitlabtest

import (
	"testing"
)

// Merge request notes: create, list (system notes included, newest first
// by default), get, edit; 400 without a body, 404 for a missing note, 403
// to edit a system note.
func TestNotesAPI(t *testing.T) {
	s, _, mrs := mrFixture(t, Behavior{})
	apiJSON(t, s, "POST", mrs, map[string]any{"source_branch": "depsd/pins", "target_branch": "main", "title": "Move pins"})
	notes := mrs + "/1/notes"
	code, out := apiJSON(t, s, "POST", notes, map[string]any{"body": "| dependent | result |"})
	m, _ := out.(map[string]any)
	if code != 201 || m["body"] != "| dependent | result |" || m["system"] != false || m["noteable_type"] != "MergeRequest" ||
		m["noteable_iid"] != 1.0 || m["author"].(map[string]any)["username"] != TokenUsername {
		t.Fatalf("create: %d %v", code, out)
	}
	id := itoa(int64(m["id"].(float64)))
	mustDo[string](t)(s.PushToMR("g/app", 1, "README.md", "x")) // a system note
	code, out = apiJSON(t, s, "GET", notes, nil)
	list := out.([]any)
	if code != 200 || len(list) != 2 || list[0].(map[string]any)["system"] != true || list[0].(map[string]any)["body"] != "added 1 commit" ||
		toJSON(list[1].(map[string]any)["id"]) != id {
		t.Fatalf("list: %d %v", code, out)
	}
	if code, out := apiJSON(t, s, "GET", notes+"?sort=asc", nil); code != 200 || toJSON(out.([]any)[0].(map[string]any)["id"]) != id {
		t.Fatalf("list asc: %d %v", code, out)
	}
	code, out = apiJSON(t, s, "PUT", notes+"/"+id, map[string]any{"body": "| dependent | result |\n| ruby | success |"})
	if code != 200 || out.(map[string]any)["body"] != "| dependent | result |\n| ruby | success |" {
		t.Fatalf("edit: %d %v", code, out)
	}
	if code, out := apiJSON(t, s, "GET", notes+"/"+id, nil); code != 200 || out.(map[string]any)["body"] != "| dependent | result |\n| ruby | success |" {
		t.Fatalf("get: %d %v", code, out)
	}
	system := toJSON(list[0].(map[string]any)["id"])
	for _, tt := range []struct {
		method, path string
		body         map[string]any
		code         int
		want         string
	}{
		{"POST", notes, map[string]any{}, 400, `{"error":"body is missing"}`},
		{"PUT", notes + "/" + id, map[string]any{}, 400, `{"error":"body is missing"}`},
		{"PUT", notes + "/" + system, map[string]any{"body": "x"}, 403, `{"message":"403 Forbidden"}`},
		{"GET", notes + "/999999", nil, 404, `{"message":"404 Note Not Found"}`},
		{"GET", mrs + "/7/notes", nil, 404, `{"message":"404 Merge Request Not Found"}`},
	} {
		if code, out := apiJSON(t, s, tt.method, tt.path, tt.body); code != tt.code || toJSON(out) != tt.want {
			t.Errorf("%s %s: %d %s, want %d %s", tt.method, tt.path, code, toJSON(out), tt.code, tt.want)
		}
	}
	if n := s.MergeRequests("g/app")[0].Notes; len(n) != 2 || n[0].Author != TokenUsername || n[1].System != true {
		t.Fatalf("stored notes: %+v", n)
	}
}
