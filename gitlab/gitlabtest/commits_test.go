package gitlabtest

import (
	"encoding/base64"
	"maps"
	"slices"
	"testing"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// POST /repository/commits as GitLab answers it: a commit on a new branch
// from start_branch with create, update, delete and move actions (the
// CommitDetail answer, a Push Hook by the token's user, a pipeline with
// OnPush); the refusals in GitLab's order and words; last_commit_id; force
// onto an existing branch; a protected branch refused to a Developer and
// allowed to a Maintainer.
func TestCommitsAPI(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	if _, err := s.AddProject(Project{Path: "g/app", Files: map[string]string{
		"Containerfile": "FROM base@sha256:aaa\n", "old.txt": "old\n", "gone.txt": "x\n",
	}}); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	mustDo[int64](t)(s.AddHook("g/app", Hook{URL: rc.URL, Events: []string{"push_events", "pipeline_events"}}))
	if err := s.SetPipelineBehavior("g/app", Behavior{OnPush: true}); err != nil {
		t.Fatal(err)
	}
	commits := "/projects/" + pathID("g/app") + "/repository/commits"
	_, h, _ := rawGet(t, s, "/projects/"+pathID("g/app")+"/repository/files/Containerfile/raw")
	last := h.Get("X-Gitlab-Last-Commit-Id")
	main := s.Branches("g/app")["main"]

	code, out := apiJSON(t, s, "POST", commits, map[string]any{
		"branch": "depsd/pins", "start_branch": "main", "commit_message": "Move the base pin\n\nBody",
		"author_name": "depsd", "author_email": "depsd@example.com",
		"actions": []any{
			map[string]any{"action": "update", "file_path": "Containerfile", "content": "FROM base@sha256:bbb\n", "last_commit_id": last},
			map[string]any{"action": "create", "file_path": "new.txt", "content": base64.StdEncoding.EncodeToString([]byte("new\n")), "encoding": "base64"},
			map[string]any{"action": "delete", "file_path": "gone.txt"},
			map[string]any{"action": "move", "previous_path": "old.txt", "file_path": "moved.txt"},
		},
	})
	m, _ := out.(map[string]any)
	if code != 201 || m["title"] != "Move the base pin" || m["message"] != "Move the base pin\n\nBody" || m["author_name"] != "depsd" ||
		m["committer_name"] != botUser.name || toJSON(m["parent_ids"]) != `["`+main+`"]` || m["project_id"] != float64(mustID(t, s, "g/app")) ||
		toJSON(m["stats"]) != `{"additions":3,"deletions":3,"total":6}` || m["status"] != nil || m["short_id"] != m["id"].(string)[:8] {
		t.Fatalf("create: %d %v", code, out)
	}
	sha := m["id"].(string)
	want := map[string]string{"Containerfile": "FROM base@sha256:bbb\n", "new.txt": "new\n", "moved.txt": "old\n"}
	if got := s.Files("g/app", "depsd/pins"); !maps.Equal(got, want) || s.Branches("g/app")["depsd/pins"] != sha || s.Branches("g/app")["main"] != main {
		t.Fatalf("files %v, branches %v", got, s.Branches("g/app"))
	}
	r := rc.next(t)
	ev := mustDo[any](t)(gl.ParseWebhook(gl.EventTypePush, r.body)).(*gl.PushEvent)
	if ev.Ref != "refs/heads/depsd/pins" || ev.Before != zeroSHA || ev.After != sha || ev.TotalCommitsCount != 1 || ev.UserUsername != TokenUsername ||
		ev.Commits[0].Author.Name != "depsd" || !slices.Equal(ev.Commits[0].Added, []string{"moved.txt", "new.txt"}) ||
		!slices.Equal(ev.Commits[0].Removed, []string{"gone.txt", "old.txt"}) || !slices.Equal(ev.Commits[0].Modified, []string{"Containerfile"}) {
		t.Fatalf("push hook: %s", r.body)
	}
	pls := s.Pipelines("g/app")
	if len(pls) != 1 || pls[0].Ref != "depsd/pins" || pls[0].SHA != sha || pls[0].Source != "push" || pls[0].Username != TokenUsername {
		t.Fatalf("pipelines: %+v", pls)
	}

	update := func(branch string, extra map[string]any, actions ...any) map[string]any {
		body := map[string]any{"branch": branch, "commit_message": "m", "actions": actions}
		maps.Copy(body, extra)
		return body
	}
	up := func(path string) any { return map[string]any{"action": "update", "file_path": path, "content": "y"} }
	for _, tt := range []struct {
		name string
		body map[string]any
		code int
		want string
	}{
		{"protected branch", update("main", nil, up("Containerfile")), 403, `{"message":"403 Forbidden - You are not allowed to push into this branch"}`},
		{"no actions", update("x", nil), 400, `{"message":"400 Bad request - actions is required"}`},
		{"no message", map[string]any{"branch": "x", "actions": []any{up("a")}}, 400, `{"message":"400 Bad request - commit_message is required"}`},
		{"bad action", update("x", nil, map[string]any{"action": "rename", "file_path": "a"}), 400, `{"message":"400 Bad request - actions[0][action] must be one of: create, update, move, delete, chmod"}`},
		{"update without content", update("x", nil, map[string]any{"action": "update", "file_path": "a"}), 400, `{"message":"400 Bad request - actions[0][content] is required for update action"}`},
		{"missing start branch", update("x", map[string]any{"start_branch": "nope"}, up("a")), 400, `{"message":"You can only create or edit files when you are on a branch"}`},
		{"missing branch", update("nope", nil, up("a")), 400, `{"message":"You can only create or edit files when you are on a branch"}`},
		{"branch exists", update("depsd/pins", map[string]any{"start_branch": "main"}, up("Containerfile")), 400, `{"message":"A branch called 'depsd/pins' already exists. Switch to that branch in order to make changes"}`},
		{"update a missing file", update("depsd/pins", nil, up("nope")), 400, `{"message":"A file with this name doesn't exist"}`},
		{"create an existing file", update("depsd/pins", nil, map[string]any{"action": "create", "file_path": "new.txt", "content": "z"}), 400, `{"message":"A file with this name already exists"}`},
		{"stale last_commit_id", update("depsd/pins", nil, map[string]any{"action": "update", "file_path": "Containerfile", "content": "z", "last_commit_id": last}), 400, `{"message":"The file has changed since you started editing it: Containerfile"}`},
	} {
		if code, out := apiJSON(t, s, "POST", commits, tt.body); code != tt.code || toJSON(out) != tt.want {
			t.Errorf("%s: %d %s, want %d %s", tt.name, code, toJSON(out), tt.code, tt.want)
		}
	}
	if got := s.Branches("g/app")["depsd/pins"]; got != sha || len(s.Pipelines("g/app")) != 1 {
		t.Fatalf("a refused commit moved depsd/pins to %s or ran a pipeline", got)
	}

	// force: depsd/pins starts over from main, dropping its commit.
	code, out = apiJSON(t, s, "POST", commits, update("depsd/pins", map[string]any{"start_branch": "main", "force": true},
		map[string]any{"action": "update", "file_path": "Containerfile", "content": "FROM base@sha256:ccc\n", "last_commit_id": last}))
	if code != 201 || toJSON(out.(map[string]any)["parent_ids"]) != `["`+main+`"]` || s.Files("g/app", "depsd/pins")["old.txt"] != "old\n" {
		t.Fatalf("force: %d %v", code, out)
	}
	for {
		r := rc.next(t)
		if r.header.Get("X-Gitlab-Event") != PushHook {
			continue
		}
		ev := mustDo[any](t)(gl.ParseWebhook(gl.EventTypePush, r.body)).(*gl.PushEvent)
		if ev.Before != sha || ev.After != out.(map[string]any)["id"] {
			t.Fatalf("forced push hook: %s", r.body)
		}
		break
	}

	// A Maintainer may push to main, and no one to a "no one" branch; a
	// force push onto a protected branch needs a rule allowing it.
	if err := s.SetCISettings("g/app", CISettings{TokenRole: RoleMaintainer}); err != nil {
		t.Fatal(err)
	}
	if code, out := apiJSON(t, s, "POST", commits, update("main", nil, up("Containerfile"))); code != 201 {
		t.Fatalf("a Maintainer's commit to main: %d %v", code, out)
	}
	if code, out := apiJSON(t, s, "POST", commits, update("main", map[string]any{"start_branch": "depsd/pins", "force": true}, up("Containerfile"))); code != 400 ||
		toJSON(out) != `{"message":"You are not allowed to force push code to a protected branch on this project."}` {
		t.Fatalf("force onto main: %d %v", code, out)
	}
	if err := s.ProtectBranch("g/app", "main", Protection{Push: RoleNoOneAllowed}); err != nil {
		t.Fatal(err)
	}
	if code, _ := apiJSON(t, s, "POST", commits, update("main", nil, up("Containerfile"))); code != 403 {
		t.Fatalf("push to a no-one branch: %d", code)
	}
}

func mustID(t *testing.T, s *Server, path string) int64 {
	t.Helper()
	info, ok := s.Project(path)
	if !ok {
		t.Fatalf("no project %s", path)
	}
	return info.ID
}
