// Package templates holds the GitLab CI/CD components this repository
// ships, in GitLab's layout for a component project (templates/<name>.yml):
// image-build.yml, the build a project includes in one line
// (docs/build-component.md). The Go side only embeds them, for the code
// that seeds them into a GitLab (depsd demo --real, the real chain's
// tests).
package templates

import _ "embed"

// ImageBuild is templates/image-build.yml.
//
//go:embed image-build.yml
var ImageBuild string

// ImageBuildName is the component's name in an include: component:
// location (<fqdn>/<project>/image-build@<version>).
const ImageBuildName = "image-build"
