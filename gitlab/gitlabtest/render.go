package gitlabtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// gitlabTime formats times the way the REST API does: UTC with milliseconds.
func gitlabTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func timePtr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := gitlabTime(t)
	return &s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeMessage(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"message": msg})
}

type namespaceJSON struct {
	ID        int64   `json:"id"`
	Name      string  `json:"name"`
	Path      string  `json:"path"`
	Kind      string  `json:"kind"`
	FullPath  string  `json:"full_path"`
	ParentID  *int64  `json:"parent_id"`
	AvatarURL *string `json:"avatar_url"`
	WebURL    string  `json:"web_url"`
}

// simpleProjectJSON is what GitLab returns with simple=true: no archived,
// empty_repo or container_registry_image_prefix.
type simpleProjectJSON struct {
	ID                int64         `json:"id"`
	Description       *string       `json:"description"`
	Name              string        `json:"name"`
	NameWithNamespace string        `json:"name_with_namespace"`
	Path              string        `json:"path"`
	PathWithNamespace string        `json:"path_with_namespace"`
	CreatedAt         string        `json:"created_at"`
	DefaultBranch     string        `json:"default_branch"`
	TagList           []string      `json:"tag_list"`
	Topics            []string      `json:"topics"`
	SSHURLToRepo      string        `json:"ssh_url_to_repo"`
	HTTPURLToRepo     string        `json:"http_url_to_repo"`
	WebURL            string        `json:"web_url"`
	ReadmeURL         *string       `json:"readme_url"`
	ForksCount        int           `json:"forks_count"`
	AvatarURL         *string       `json:"avatar_url"`
	StarCount         int           `json:"star_count"`
	LastActivityAt    string        `json:"last_activity_at"`
	Namespace         namespaceJSON `json:"namespace"`
}

type projectJSON struct {
	simpleProjectJSON
	Visibility                   string  `json:"visibility"`
	ContainerRegistryImagePrefix string  `json:"container_registry_image_prefix"`
	Archived                     bool    `json:"archived"`
	EmptyRepo                    bool    `json:"empty_repo"`
	UpdatedAt                    string  `json:"updated_at"`
	MarkedForDeletionAt          *string `json:"marked_for_deletion_at"`
	MarkedForDeletionOn          *string `json:"marked_for_deletion_on"`
	ContainerRegistryEnabled     bool    `json:"container_registry_enabled"`
	JobsEnabled                  bool    `json:"jobs_enabled"`
	RepositoryAccessLevel        string  `json:"repository_access_level"`
	// CI/CD settings, shown to users who may administer the project
	// (Maintainer, Owner): API::Entities::Project.
	RestrictUserDefinedVariables           *bool   `json:"restrict_user_defined_variables,omitempty"`
	CIPipelineVariablesMinimumOverrideRole *string `json:"ci_pipeline_variables_minimum_override_role,omitempty"`
}

// projectWithAccessJSON is GET /projects/:id (API::Entities::ProjectWithAccess).
type projectWithAccessJSON struct {
	projectJSON
	Permissions permissionsJSON `json:"permissions"`
}

type accessJSON struct {
	AccessLevel       int `json:"access_level"`
	NotificationLevel int `json:"notification_level"`
}

// permissionsJSON: the token's user's membership of the project and of its
// group (null when it has none there).
type permissionsJSON struct {
	ProjectAccess *accessJSON `json:"project_access"`
	GroupAccess   *accessJSON `json:"group_access"`
}

func (s *Server) host() string {
	return strings.TrimPrefix(strings.TrimPrefix(s.URL, "http://"), "https://")
}

func (s *Server) namespaceJSON(p *project) namespaceJSON {
	ns := p.namespace()
	out := namespaceJSON{Kind: "group", FullPath: ns, Path: ns[strings.LastIndex(ns, "/")+1:], WebURL: s.URL + "/groups/" + ns}
	out.Name = out.Path
	if g, ok := s.inst.groupPath[strings.ToLower(ns)]; ok {
		out.ID = g.id
		if g.parentID != 0 {
			pid := g.parentID
			out.ParentID = &pid
		}
	}
	return out
}

func (s *Server) simpleProject(p *project) simpleProjectJSON {
	nameNS := strings.ReplaceAll(p.path, "/", " / ")
	return simpleProjectJSON{
		ID:                p.id,
		Name:              p.name(),
		NameWithNamespace: nameNS,
		Path:              p.name(),
		PathWithNamespace: p.path,
		CreatedAt:         gitlabTime(p.createdAt),
		DefaultBranch:     p.defaultBranch,
		TagList:           []string{},
		Topics:            []string{},
		SSHURLToRepo:      "git@" + s.host() + ":" + p.path + ".git",
		HTTPURLToRepo:     s.URL + "/" + p.path + ".git",
		WebURL:            s.URL + "/" + p.path,
		LastActivityAt:    gitlabTime(p.lastActivityAt),
		Namespace:         s.namespaceJSON(p),
	}
}

func (s *Server) fullProject(p *project) projectJSON {
	out := projectJSON{
		simpleProjectJSON:            s.simpleProject(p),
		Visibility:                   s.visibilityOf(p),
		ContainerRegistryImagePrefix: s.registryHost + "/" + strings.ToLower(p.path),
		Archived:                     p.archived,
		EmptyRepo:                    p.emptyRepo,
		UpdatedAt:                    gitlabTime(p.lastActivityAt),
		ContainerRegistryEnabled:     true,
		JobsEnabled:                  true,
		RepositoryAccessLevel:        "enabled",
	}
	if accessLevels[p.ci.TokenRole] >= accessLevels[RoleMaintainer] {
		restrict, role := p.ci.RestrictUserDefinedVariables, p.ci.MinimumOverrideRole
		out.RestrictUserDefinedVariables, out.CIPipelineVariablesMinimumOverrideRole = &restrict, &role
	}
	return out
}

func (s *Server) projectWithAccess(p *project) projectWithAccessJSON {
	return projectWithAccessJSON{
		projectJSON: s.fullProject(p),
		Permissions: permissionsJSON{ProjectAccess: &accessJSON{AccessLevel: accessLevels[p.ci.TokenRole], NotificationLevel: 3}},
	}
}

type groupJSON struct {
	ID          int64   `json:"id"`
	Name        string  `json:"name"`
	Path        string  `json:"path"`
	Description string  `json:"description"`
	Visibility  string  `json:"visibility"`
	FullName    string  `json:"full_name"`
	FullPath    string  `json:"full_path"`
	ParentID    *int64  `json:"parent_id"`
	WebURL      string  `json:"web_url"`
	AvatarURL   *string `json:"avatar_url"`
	CreatedAt   string  `json:"created_at"`
}

func (s *Server) groupJSON(g *group) groupJSON {
	name := g.path[strings.LastIndex(g.path, "/")+1:]
	out := groupJSON{
		ID:         g.id,
		Name:       name,
		Path:       name,
		Visibility: "private",
		FullName:   strings.ReplaceAll(g.path, "/", " / "),
		FullPath:   g.path,
		WebURL:     s.URL + "/groups/" + g.path,
		CreatedAt:  gitlabTime(g.createdAt),
	}
	if g.parentID != 0 {
		pid := g.parentID
		out.ParentID = &pid
	}
	return out
}
