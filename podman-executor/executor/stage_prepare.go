package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/channel"
	"gitlab.com/depsd/depsd/podman-executor/container"
)

// HelperPath is where the runner helper is mounted in the job container:
// on the default PATH of every common image, under the name the runner's
// scripts call.
const HelperPath = "/usr/local/bin/gitlab-runner"

// keepAlive is the job container's main process: it idles until cleanup
// removes the container. Stages run as exec sessions beside it.
var keepAlive = []string{"sh", "-c", "while :; do sleep 3600; done"}

// cacheMarker is touched beside a project's cache data on every prepare,
// so gc can tell caches in use from abandoned ones; cacheData is the
// directory mounted into the job (the marker stays out of the job's view).
const (
	cacheMarker = "last-used"
	cacheData   = "data"
)

// PrepareStage pulls the job's image and services, starts the services on
// a per-job network and starts the job container, which then idles until
// cleanup. A leftover of an earlier attempt with the same name (a crashed
// or retried prepare) is removed first. Progress lines go to the job log.
func (e *Executor) PrepareStage(ctx context.Context) error {
	id, err := e.identity()
	if err != nil {
		return err
	}
	name := id.JobName()
	image := e.Job.Image(e.Config)
	if image == "" {
		return &JobError{Msg: "the job has no image and the driver config has no default_image"}
	}
	if !allowed(image, e.Config.AllowedImages) {
		return &JobError{Msg: fmt.Sprintf("image %q is not allowed by this runner (allowed_images: %s)", image, strings.Join(e.Config.AllowedImages, ", "))}
	}
	services, err := e.Job.Services()
	if err != nil {
		return &JobError{Msg: err.Error()}
	}
	for i, s := range services {
		if !allowed(s.Name, e.Config.AllowedServices) {
			return &JobError{Msg: fmt.Sprintf("service %q is not allowed by this runner (allowed_services: %s)", s.Name, strings.Join(e.Config.AllowedServices, ", "))}
		}
		services[i].Privileged = e.Config.privileged(s.Name, e.Config.AllowedPrivilegedServices)
	}
	if l := e.Config.ServicesLimit; l >= 0 && len(services) > l {
		return &JobError{Msg: fmt.Sprintf("the job has %d services and this runner allows %d (services_limit)", len(services), l)}
	}
	build := e.Config.buildImage(image)
	// GitLab reads "ruby:3.2" as docker.io/library/ruby:3.2; podman would
	// look short names up in registries.conf, which on most hosts names no
	// search registry. Aliases stay derived from the name as written.
	if image, err = qualifiedImage(image); err != nil {
		return &JobError{Msg: err.Error()}
	}
	for i := range services {
		if services[i].Aliases == nil {
			services[i].Aliases = ServiceAliases(services[i])
		}
		if services[i].Name, err = qualifiedImage(services[i].Name); err != nil {
			return &JobError{Msg: "service: " + err.Error()}
		}
	}
	if e.Config.NetworkMode == "host" && len(services) > 0 {
		return &JobError{Msg: "services need a job network, and this runner runs jobs with network_mode = \"host\""}
	}
	policies, err := e.pullPolicies(e.Job.Response.Image.PullPolicy)
	if err != nil {
		return err
	}
	servicePolicies := make([][]string, len(services))
	for i, s := range services {
		if servicePolicies[i], err = e.pullPolicies(s.PullPolicy); err != nil {
			return err
		}
	}
	if err := e.connect(ctx); err != nil {
		return err
	}
	mounts, err := e.mounts(id)
	if err != nil {
		return err
	}
	e.progress("Using %s %s with image %s", Name, Version, image)
	if err := e.removeStale(ctx, name); err != nil {
		return err
	}
	if err := e.ensureImage(ctx, image, policies, e.Job.Response.Image.ExecutorOpts.Docker.Platform); err != nil {
		return err
	}
	for i, s := range services {
		if err := e.ensureImage(ctx, s.Name, servicePolicies[i], ""); err != nil {
			return err
		}
	}

	useChannel := e.Engine.Local() && e.Config.StateDir != ""
	base := mounts
	main, mounts, err := e.withChannel(name, e.channelDir(name), keepAlive, base, useChannel)
	if err != nil {
		return err
	}
	spec, err := e.jobSpec(id, image, mounts, main)
	if err != nil {
		return err
	}
	if useChannel { // the helper container's spec starts from this one
		spec.Options = spec.Options.Merge(channelTmpfs())
	}
	// A build job in a user namespace of its own has its helper container
	// in the same one (its checkout and caches are then its own), a kept
	// builds volume of its own, and the cache chowned into it.
	var profile buildProfile
	if build {
		if profile, err = e.buildProfile(ctx, id); err != nil {
			return err
		}
	}
	if profile.ownUserNS() {
		base = chownedCache(base, e.Config.CacheDir)
		spec.Mounts = chownedCache(spec.Mounts, e.Config.CacheDir)
	}
	if vol, err := e.sharedBuildsVolume(ctx, id, profile.ownUserNS()); err != nil {
		return err
	} else if vol != "" {
		spec.Volumes = append(spec.Volumes, vol+":"+e.Config.BuildsDir)
	}
	var started []startedService
	if len(services) > 0 {
		hosts, st, err := e.startServices(ctx, id, services)
		if err != nil {
			return err
		}
		started = st
		spec.HostAdd = hosts
		spec.Networks = map[string][]string{id.NetworkName(): nil}
		if e.Config.Network != "" {
			spec.Networks[e.Config.Network] = nil
		}
	}
	if e.Config.HelperImage != "" {
		if err := e.startHelper(ctx, id, spec, base, useChannel, profile.userNS()); err != nil {
			return err
		}
	}
	if build { // the job container only: not the helper beside it
		spec.Options = spec.Options.Merge(profile.options)
		spec.Volumes = append(spec.Volumes, profile.storage)
	}
	if _, err := e.Engine.Create(ctx, spec); err != nil {
		return err
	}
	if err := e.startAndWait(ctx, name, e.channelDir(name), useChannel); err != nil {
		return fmt.Errorf("%w: does image %s have sh, and does its entrypoint run its command (else set `image: entrypoint: [\"\"]`)?", err, image)
	}
	e.progress("Job container %s is running", name)
	return e.waitForServices(ctx, id.NetworkName(), started)
}

// Roles of the volumes that outlive a job (gc removes them once unused).
const (
	roleBuilds       = "builds"
	roleBuildStorage = "build-storage"
)

// buildsVolume creates (once) the volume holding the builds directory
// and marks it used now, for gc. A job in a user namespace of its own
// (a build job's) has a volume of its own: podman gives a new volume to
// the root of the first container mounting it, and a checkout owned by
// another namespace's root is not the job's to write to.
func (e *Executor) buildsVolume(ctx context.Context, id Identity, ownUserNS bool) (string, error) {
	name := id.BuildsVolumeName()
	if ownUserNS {
		name = id.BuildJobBuildsVolumeName()
	}
	if err := e.keptVolume(ctx, id, name, roleBuilds); err != nil {
		return "", err
	}
	e.progress("Using builds volume %s at %s", name, e.Config.BuildsDir)
	return name, nil
}

// keptVolume creates (once) a volume that outlives the job -- labelled
// with role, runner and project but no job, so cleanup leaves it -- and
// touches its marker, by which gc tells it is in use.
func (e *Executor) keptVolume(ctx context.Context, id Identity, name, role string) error {
	labels := id.Labels(role, e.now())
	delete(labels, LabelGroup) // outlives the job: cleanup leaves it
	delete(labels, LabelJob)
	if role == roleBuildStorage { // shared by the project's concurrent jobs
		delete(labels, LabelConcurrent)
	}
	if err := e.Engine.CreateVolume(ctx, name, labels); err != nil {
		return err
	}
	marker := e.volumeMarker(role, name)
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return fmt.Errorf("mark %s volume: %w", role, err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return fmt.Errorf("mark %s volume: %w", role, err)
	}
	now := e.now()
	_ = os.Chtimes(marker, now, now)
	return nil
}

// volumeMarker is touched on every use of a kept volume.
func (e *Executor) volumeMarker(role, volume string) string {
	dir := "builds-volumes"
	if role == roleBuildStorage {
		dir = "build-storage-volumes"
	}
	return filepath.Join(e.Config.CacheHostDir, dir, volume+".last-used")
}

// withChannel returns a container's main process and mounts: with the
// stage channel, the channel loop and the channel directory dir mounted;
// else fallback and the mounts as they are.
func (e *Executor) withChannel(name, dir string, fallback []string, mounts []container.Mount, use bool) ([]string, []container.Mount, error) {
	if !use {
		return fallback, mounts, nil
	}
	if err := e.makeChannel(name, dir); err != nil {
		return nil, nil, err
	}
	ms := append(slices.Clone(mounts), container.Mount{Source: dir, Destination: channel.MountPoint, ReadOnly: true})
	return channel.Loop(channel.MountPoint, channel.JobMountPoint), ms, nil
}

// channelTmpfs is the tmpfs the stage loop of a container with the stage
// channel writes its stages' PIDs and ends to (nothing of it on the host).
func channelTmpfs() container.Options {
	return container.Options{Tmpfs: map[string]string{channel.JobMountPoint: channel.JobTmpfs}}
}

// startAndWait starts a created container and waits until it runs: with
// the channel in dir, until its stage loop reads (which proves it runs:
// podman is asked only if the loop is slow to come), else until podman
// reports it running.
func (e *Executor) startAndWait(ctx context.Context, name, dir string, useChannel bool) error {
	if err := e.Engine.Start(ctx, name); err != nil {
		return err
	}
	if useChannel {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		end := e.Trace.Span("ChannelReady", name)
		err := channel.Ready(rctx, dir, e.running(ctx, name))
		end(err)
		if err != nil {
			return fmt.Errorf("container %s: %w", name, err)
		}
		return nil
	}
	return e.running(ctx, name)()
}

// running returns a check that fails unless the container just started
// runs.
func (e *Executor) running(ctx context.Context, name string) func() error {
	return func() error {
		info, err := e.Engine.Inspect(ctx, name)
		if err != nil {
			return err
		}
		if !info.Running {
			return fmt.Errorf("container %s stopped right after start", name)
		}
		return nil
	}
}

// sharedBuildsVolume is the volume holding builds_dir, or "" when it
// stays in the job container: the persistent builds volume, else with a
// helper container a volume of this job (removed by cleanup) that both
// containers mount.
func (e *Executor) sharedBuildsVolume(ctx context.Context, id Identity, ownUserNS bool) (string, error) {
	switch {
	case e.Config.BuildsVolume:
		return e.buildsVolume(ctx, id, ownUserNS)
	case e.Config.HelperImage != "":
		name := id.JobName() + "-builds"
		return name, e.Engine.CreateVolume(ctx, name, id.Labels("builds", e.now()))
	}
	return "", nil
}

// startHelper starts the helper container: helper_image, sharing the job
// container's builds directory, cache, volumes and networks, running the
// stages that fetch sources and handle caches and artifacts, so the job
// image needs neither git nor the runner helper.
func (e *Executor) startHelper(ctx context.Context, id Identity, job container.Spec, mounts []container.Mount, useChannel bool, userNS container.Options) error {
	if err := e.ensureImage(ctx, e.Config.HelperImage, []string{e.Config.PullPolicy}, ""); err != nil {
		return err
	}
	name := id.HelperName()
	main, mounts, err := e.withChannel(id.JobName(), e.helperChannelDir(id.JobName()), keepAlive, mounts, useChannel)
	if err != nil {
		return err
	}
	s := job
	s.Name, s.Image = name, e.Config.HelperImage
	s.Entrypoint, s.Command = main, []string{}
	s.User, s.Platform = "", ""
	s.Privileged = e.Config.privileged(e.Config.HelperImage, e.Config.AllowedPrivilegedImages)
	s.Labels = id.Labels("helper", e.now())
	s.Mounts = mounts
	s.Options = s.Options.Merge(userNS)
	if _, err := e.Engine.Create(ctx, s); err != nil {
		return err
	}
	if err := e.startAndWait(ctx, name, e.helperChannelDir(id.JobName()), useChannel); err != nil {
		return fmt.Errorf("helper container: %w: does helper_image %s have sh?", err, e.Config.HelperImage)
	}
	e.progress("Helper container %s (%s) is running", name, e.Config.HelperImage)
	return nil
}

// makeChannel creates the job's state directory (0700: the umask cannot
// widen it) and the stage channel dir in it, afresh (channel.Create).
func (e *Executor) makeChannel(name, dir string) error {
	if err := os.MkdirAll(e.Config.StateDir, 0o700); err != nil {
		return fmt.Errorf("state_dir: %w", err)
	}
	job := e.jobStateDir(name)
	if err := os.Mkdir(job, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("state_dir: %w", err)
	}
	return channel.Create(dir)
}

// alive returns a check that fails once the job container stops.
func (e *Executor) alive(ctx context.Context, name string) func() error {
	return func() error {
		if err := e.connect(ctx); err != nil {
			return err
		}
		info, err := e.Engine.Inspect(ctx, name)
		if err != nil {
			return err
		}
		if !info.Running {
			return fmt.Errorf("job container %s is not running", name)
		}
		return nil
	}
}

// progress writes one line to the job log.
func (e *Executor) progress(format string, args ...any) {
	fmt.Fprintf(e.Stdout, format+"\n", args...)
}

// removeStale removes what an earlier attempt of this job left behind,
// refusing to touch a same-named container the executor did not create.
func (e *Executor) removeStale(ctx context.Context, name string) error {
	info, err := e.Engine.Inspect(ctx, name)
	switch {
	case errors.Is(err, container.ErrNotFound):
	case err != nil:
		return err
	case info.Labels[LabelManaged] != "true":
		return fmt.Errorf("a container named %s exists and was not created by %s: not touching it", name, Name)
	default:
		e.progress("Removing container %s left by an earlier attempt", name)
	}
	return e.removeGroup(ctx, name)
}

// pullPolicies are the policies to try, in order, for an image whose
// job asks for requested (`pull_policy:`; empty: the driver's own). A
// policy outside allowed_pull_policies is the job's error.
func (e *Executor) pullPolicies(requested []string) ([]string, error) {
	if len(requested) == 0 {
		return []string{e.Config.PullPolicy}, nil
	}
	allowed := e.Config.AllowedPullPolicies
	if len(allowed) == 0 {
		allowed = []string{e.Config.PullPolicy}
	}
	for _, p := range requested {
		if !slices.Contains(allowed, p) {
			return nil, &JobError{Msg: fmt.Sprintf("pull_policy (%s) defined in the job is not one of the allowed_pull_policies of this runner (%s)",
				strings.Join(requested, ", "), strings.Join(allowed, ", "))}
		}
	}
	return requested, nil
}

// ensureImage makes image present, trying each pull policy in turn (as
// GitLab does with a list of policies) until one succeeds.
func (e *Executor) ensureImage(ctx context.Context, image string, policies []string, platform string) error {
	var errs []error
	for _, p := range policies {
		err := e.ensureImageWith(ctx, image, p, platform)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if len(policies) > 1 {
			e.progress("WARNING: pull_policy %s for %s failed: %v", p, image, err)
		}
	}
	return errors.Join(errs...)
}

// ensureImageWith makes image present according to one pull policy.
func (e *Executor) ensureImageWith(ctx context.Context, image, policy, platform string) error {
	if policy != "always" {
		ok, err := e.Engine.ImageExists(ctx, image)
		if err != nil {
			return err
		}
		if ok {
			e.progress("Using locally present image %s", image)
			return nil
		}
		if policy == "never" {
			return fmt.Errorf("image %s is not present locally and pull_policy is never", image)
		}
	}
	opts := container.PullOptions{Policy: "missing", SkipTLSVerify: e.Config.insecure(registryHost(image)), Platform: platform}
	if policy == "always" {
		opts.Policy = "always"
	}
	scratch, err := os.MkdirTemp("", "podman-executor-auth-")
	if err != nil {
		return fmt.Errorf("pull %s: %w", image, err)
	}
	defer os.RemoveAll(scratch)
	var source string
	if opts.Auth, source, err = credentials(image, e.Job, e.Config, scratch); err != nil {
		return err
	}
	how := ""
	if platform != "" {
		how = " for platform " + platform
	}
	if source != "" {
		how += " with credentials from " + source
	}
	if opts.SkipTLSVerify {
		how += " (insecure registry: no TLS verification)"
	}
	e.progress("Pulling image %s%s", image, how)
	err = e.Engine.Pull(ctx, image, opts, e.Stdout)
	if err != nil && !opts.SkipTLSVerify && strings.Contains(err.Error(), "HTTP response to HTTPS client") {
		return fmt.Errorf("%w (a plain-HTTP registry must be listed in the driver config's insecure_registries)", err)
	}
	return err
}

// mounts are the job container's bind mounts: the job's cache directory
// and the runner helper (the configured volumes go in Spec.Volumes).
func (e *Executor) mounts(id Identity) ([]container.Mount, error) {
	root := filepath.Join(e.Config.CacheHostDir, "runner-"+clean(id.Runner), "project-"+id.storeKey())
	cache := filepath.Join(root, cacheData)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("create cache directory: %w", err)
	}
	marker := filepath.Join(root, cacheMarker)
	now := e.now()
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return nil, fmt.Errorf("mark cache directory: %w", err)
	}
	_ = os.Chtimes(marker, now, now)
	ms := []container.Mount{{Source: cache, Destination: e.Config.CacheDir}}
	if h := e.Config.HelperBinary; h != "" && h != "none" {
		if _, err := os.Stat(h); err != nil {
			return nil, fmt.Errorf("runner helper: %w", err)
		}
		ms = append(ms, container.Mount{Source: h, Destination: HelperPath, ReadOnly: true})
	} else {
		e.progress("WARNING: no runner helper configured: artifacts and caches will not work")
	}
	return ms, nil
}

// chownedCache returns mounts with the cache directory (mounted at dir)
// chowned to the container's user at start: for a build job in a user
// namespace of its own, whose root could not write to the project's cache
// as the other jobs (the host's root) left it; they, root, still can.
func chownedCache(mounts []container.Mount, dir string) []container.Mount {
	out := slices.Clone(mounts)
	for i := range out {
		if out[i].Destination == dir {
			out[i].Chown = true
		}
	}
	return out
}

// jobSpec describes the job container; main is the job container's main process: the stage channel's loop,
// or keepAlive.
func (e *Executor) jobSpec(id Identity, image string, mounts []container.Mount, main []string) (container.Spec, error) {
	mem, err := e.Config.memoryBytes()
	if err != nil {
		return container.Spec{}, err
	}
	opts := e.Job.Response.Image
	s := container.Spec{
		Name:       id.JobName(),
		Image:      image,
		Entrypoint: main,
		Command:    []string{},
		User:       opts.ExecutorOpts.Docker.User,
		Platform:   opts.ExecutorOpts.Docker.Platform,
		Labels:     id.Labels("job", e.now()),
		Mounts:     mounts,
		Volumes:    e.Config.Volumes,
		Memory:     mem,
		CPUs:       e.Config.CPUs,
		PidsLimit:  e.Config.PidsLimit,
		Privileged: e.Config.privileged(e.Job.Image(e.Config), e.Config.AllowedPrivilegedImages),
		Options:    e.Config.jobOptions(),
	}
	// As GitLab's docker executor does, the image's ENTRYPOINT (or the
	// job's `image: entrypoint`) starts the main process, so what it sets
	// up is there for the stages; `entrypoint: [""]` disables it.
	switch ep := opts.Entrypoint; {
	case len(ep) == 1 && ep[0] == "":
	case len(ep) > 0:
		s.Entrypoint, s.Command = ep, main
	default:
		s.Entrypoint, s.Command = nil, main
	}
	if e.Config.Network != "" {
		s.Networks = map[string][]string{e.Config.Network: nil}
	}
	s.HostNetwork = e.Config.NetworkMode == "host"
	return s, nil
}

// startServices creates the job's network and starts each service on it
// under its aliases. It returns /etc/hosts lines for the job container, so
// the aliases resolve even where the network has no DNS.
func (e *Executor) startServices(ctx context.Context, id Identity, services []Service) ([]string, []startedService, error) {
	net := id.NetworkName()
	if err := e.Engine.CreateNetwork(ctx, net, id.Labels("network", e.now())); err != nil {
		return nil, nil, err
	}
	mem, err := e.Config.memoryBytes()
	if err != nil {
		return nil, nil, err
	}
	if m, err := e.Config.serviceMemoryBytes(); err != nil {
		return nil, nil, err
	} else if m > 0 {
		mem = m
	}
	cpus := e.Config.CPUs
	if e.Config.ServiceCPUs > 0 {
		cpus = float64(e.Config.ServiceCPUs)
	}
	var started []startedService
	names := make([]string, len(services))
	aliases := make([][]string, len(services))
	for i, s := range services {
		names[i] = id.ServiceName(i)
		aliases[i] = s.Aliases
		env := e.Job.ServiceEnv()
		maps.Copy(env, s.Variables)
		spec := container.Spec{
			Name:       names[i],
			Image:      s.Name,
			Entrypoint: s.Entrypoint,
			Command:    s.Command,
			Env:        env,
			Labels:     id.Labels("service", e.now()),
			Networks:   map[string][]string{net: aliases[i]},
			Memory:     mem,
			CPUs:       cpus,
			PidsLimit:  e.Config.PidsLimit,
			Privileged: s.Privileged,
			Options:    e.Config.serviceOptions(),
		}
		if len(aliases[i]) > 0 {
			spec.Hostname = aliases[i][0]
		}
		e.progress("Starting service %s as %s", s.Name, strings.Join(aliases[i], ", "))
		if _, err := e.Engine.Create(ctx, spec); err != nil {
			return nil, nil, err
		}
		if err := e.Engine.Start(ctx, names[i]); err != nil {
			return nil, nil, err
		}
	}
	var hosts []string
	for i, name := range names {
		info, err := e.Engine.Inspect(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		started = append(started, startedService{name: name, image: services[i].Name})
		if !info.Running {
			continue // the readiness check reports it, with its logs
		}
		if ip := info.IPs[net]; ip != "" {
			for _, a := range aliases[i] {
				hosts = append(hosts, a+":"+ip)
			}
		}
	}
	return hosts, started, nil
}

// sinceLabel is how old a labelled thing is, from its created label, else
// from podman's creation time.
func sinceLabel(labels map[string]string, created, now time.Time) time.Duration {
	if t, err := time.Parse(time.RFC3339, labels[LabelCreated]); err == nil {
		return now.Sub(t)
	}
	return now.Sub(created)
}
