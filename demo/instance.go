package demo

import (
	"cmp"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// sampleProjects is the demo's GitLab instance: a base image FROM an
// external debian, a ruby runtime FROM it, an app FROM ruby, a diamond
// (two tool images FROM base, one image combining both), and a docs site
// that declares its upstream in .gitlab-deps.
func sampleProjects() []gitlabtest.Project { return sampleProjectsOn("") }

// sampleProjectsOn is the sample with its images on registry host reg
// (empty: gitlabtest's default, which is not a real registry).
func sampleProjectsOn(reg string) []gitlabtest.Project {
	base := "ARG DEBIAN=bookworm-slim\nFROM debian:${DEBIAN}\nRUN apt-get update && apt-get -y upgrade\n"
	if reg != "" {
		// Verified, a base FROM debian would be judged against Docker
		// Hub's image: the demo reads nothing outside its registry.
		base = "FROM scratch\nADD rootfs.tar /\n"
	}
	reg = cmp.Or(reg, gitlabtest.DefaultRegistryHost) + "/"
	return []gitlabtest.Project{
		{Path: "infra/images/base", Files: map[string]string{"Containerfile": base}},
		{Path: "infra/images/ruby", Files: map[string]string{
			"Containerfile": "FROM " + reg + "infra/images/base:latest\nRUN apt-get install -y ruby\n"}},
		{Path: "apps/shop", Files: map[string]string{
			"Containerfile": "FROM " + reg + "infra/images/ruby:latest AS build\nRUN bundle install\nFROM build\n"}},
		{Path: "infra/tools/lint", Files: map[string]string{
			"Containerfile": "FROM " + reg + "infra/images/base:latest\n"}},
		{Path: "infra/tools/scan", Files: map[string]string{
			"Dockerfile": "FROM " + reg + "infra/images/base:latest\n"}},
		{Path: "infra/tools/ci", Files: map[string]string{
			"Containerfile": "FROM " + reg + "infra/tools/lint:latest\nCOPY --from=" + reg + "infra/tools/scan:latest /usr/bin/scan /usr/bin/scan\n"}},
		{Path: "apps/docs", Files: map[string]string{
			".gitlab-deps": "# rebuilt whenever the shop changes\napps/shop\n"}},
	}
}

// pastMinutes is how long each project's earlier pipelines took on the
// sample instance, so that rebuild estimates have a history to go by.
func pastMinutes() map[string][]int {
	return map[string][]int{
		"infra/images/base": {6, 7, 6}, "infra/images/ruby": {9, 11, 10}, "apps/shop": {14, 12, 13},
		"infra/tools/lint": {3, 3, 4}, "infra/tools/scan": {5, 4, 5}, "infra/tools/ci": {2, 2, 3},
	}
}

// seed creates the sample projects on srv with a history of successful
// pipelines (apps/docs has none); every new pipeline runs for pipelineTime
// and succeeds. With a registry, successful pipelines push the images of
// sampleImages there.
func seed(srv *gitlabtest.Server, pipelineTime time.Duration, reg string) error {
	day := time.Now().Add(-24 * time.Hour)
	past := pastMinutes()
	images := sampleImages(reg)
	for _, p := range sampleProjectsOn(reg) {
		if _, err := srv.AddProject(p); err != nil {
			return fmt.Errorf("seed %s: %w", p.Path, err)
		}
		for i, m := range past[p.Path] {
			start := day.Add(time.Duration(i) * time.Hour)
			if _, err := srv.AddPastPipeline(p.Path, "", "push", "success", start, start.Add(time.Duration(m)*time.Minute)); err != nil {
				return fmt.Errorf("seed %s: %w", p.Path, err)
			}
		}
		if err := srv.SetPipelineBehavior(p.Path, gitlabtest.Behavior{Duration: pipelineTime, Outcome: "success"}); err != nil {
			return fmt.Errorf("seed %s: %w", p.Path, err)
		}
		if im, ok := images[p.Path]; ok && reg != "" {
			if err := srv.SetImages(p.Path, im); err != nil {
				return fmt.Errorf("seed %s: %w", p.Path, err)
			}
		}
	}
	return nil
}
