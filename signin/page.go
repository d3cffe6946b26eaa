package signin

import (
	"html/template"
	"net/http"
)

// signInTemplate is the one page an outsider gets: a link to GitLab's
// sign-in, styled by the dashboard's stylesheet (a public asset).
var signInTemplate = template.Must(template.New("signin").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · depsd</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/style.css">
</head>
<body>
<header class="top"><nav aria-label="Main"><span class="brand">depsd</span></nav></header>
<main id="main" class="signin">
<h1>Sign in</h1>
<p>depsd shows each person the projects they can read on GitLab.</p>
{{if .Message}}<p class="why" role="alert" id="signin-message">{{.Message}}</p>{{end}}
<p><a class="button" id="signin-gitlab" href="/auth/login?return={{urlquery .Return}}">Sign in with GitLab</a></p>
</main>
</body>
</html>
`))

// signInPage writes the sign-in page with a message (none: ""). Its link
// brings the browser back to the page it asked for.
func (s *Service) signInPage(w http.ResponseWriter, r *http.Request, code int, message string) {
	ret := r.URL.RequestURI()
	switch {
	case r.URL.Path == "/auth/signin":
		ret = r.URL.Query().Get("return")
	case r.Method != http.MethodGet || r.URL.Path == "/auth/callback":
		ret = "/"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	signInTemplate.Execute(w, map[string]string{"Message": message, "Return": safeReturn(ret)})
}
