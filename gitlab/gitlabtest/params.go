package gitlabtest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
)

// params are the attributes of a POST or PUT: GitLab accepts them as a JSON
// body, as a form, or in the query string.
type params map[string]any

func readParams(r *http.Request) (params, error) {
	out := params{}
	for k, v := range r.URL.Query() {
		out[k] = v[0]
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return nil, err
		}
		if len(body) == 0 {
			return out, nil
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("body is not a JSON object")
		}
		for k, v := range m {
			out[k] = v
		}
	case "application/x-www-form-urlencoded", "multipart/form-data":
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		for k, v := range r.PostForm {
			out[k] = v[0]
		}
	}
	return out, nil
}

func (p params) str(key string) (string, bool) {
	switch v := p[key].(type) {
	case string:
		return v, true
	case nil:
		return "", false
	default:
		return fmt.Sprint(v), true
	}
}

func (p params) boolean(key string) (val, ok bool) {
	switch v := p[key].(type) {
	case bool:
		return v, true
	case string:
		b, err := strconv.ParseBool(v)
		return b, err == nil
	}
	return false, false
}

func badRequest(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": msg})
}
