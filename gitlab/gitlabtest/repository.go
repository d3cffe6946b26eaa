package gitlabtest

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
)

// BlobID is git's object id of a file with content (SHA-1 of
// "blob <size>\x00<content>"), as GitLab reports it in repository trees.
func BlobID(content string) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(content)) + "\x00"))
	h.Write([]byte(content))
	return hex.EncodeToString(h.Sum(nil))
}

// treeID is an id for a directory of a commit: a hash of what it holds, so
// equal directories have equal ids as in git (the value itself differs
// from git's, which clients do not compute).
func treeID(files map[string]string, dir string) string {
	h := sha1.New()
	prefix := dir + "/"
	if dir == "" {
		prefix = ""
	}
	keys := make([]string, 0, len(files))
	for k := range files {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		h.Write([]byte(k + "\x00" + BlobID(files[k]) + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

type treeEntryJSON struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"` // "tree" or "blob"
	Path string `json:"path"`
	Mode string `json:"mode"`
}

// listTree answers GET /projects/:id/repository/tree: the entries of the
// directory path (the root by default) at ref (the default branch by
// default), or of everything below it with recursive=true, directories
// first, each group by name, with offset pagination (20 a page by
// default, at most 100). A ref that does not exist, an empty repository
// and a path that is not a directory answer 404 Tree Not Found, as GitLab
// does since 16.6.
func (s *Server) listTree(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	ref := cmp.Or(q.Get("ref"), p.defaultBranch)
	c, ok := p.resolve(ref)
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Tree Not Found")
		return
	}
	dir := strings.Trim(q.Get("path"), "/")
	recursive := q.Get("recursive") == "true"
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	seen := map[string]bool{}
	var entries []treeEntryJSON
	for name, content := range c.files {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		segs := strings.Split(rest, "/")
		// Directories on the way to the file.
		for i := 1; i < len(segs); i++ {
			if !recursive && i > 1 {
				break
			}
			sub := prefix + strings.Join(segs[:i], "/")
			if !seen[sub] {
				seen[sub] = true
				entries = append(entries, treeEntryJSON{ID: treeID(c.files, sub), Name: segs[i-1], Type: "tree", Path: sub, Mode: "040000"})
			}
		}
		if len(segs) == 1 || recursive {
			entries = append(entries, treeEntryJSON{ID: BlobID(content), Name: path.Base(name), Type: "blob", Path: name, Mode: "100644"})
		}
	}
	if len(entries) == 0 {
		// An empty directory does not exist in git: the path is not a tree.
		writeMessage(w, http.StatusNotFound, "404 Tree Not Found")
		return
	}
	slices.SortFunc(entries, func(a, b treeEntryJSON) int {
		if a.Type != b.Type {
			return cmp.Compare(b.Type, a.Type) // "tree" before "blob"
		}
		return cmp.Compare(a.Path, b.Path)
	})
	writeJSON(w, http.StatusOK, paginate(s, w, r, entries))
}

// getRawBlob answers GET /projects/:id/repository/blobs/:sha/raw with the
// content of a blob of any commit of the project.
func (s *Server) getRawBlob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	sha := r.PathValue("sha")
	for _, c := range p.commits {
		for _, content := range c.files {
			if BlobID(content) == sha {
				h := w.Header()
				h.Set("Content-Type", "text/plain; charset=utf-8")
				h.Set("Content-Length", strconv.Itoa(len(content)))
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte(content))
				return
			}
		}
	}
	writeMessage(w, http.StatusNotFound, "404 Blob Not Found")
}
