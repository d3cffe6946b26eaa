// Package buildkitref_test compares depsd's Containerfile analysis with
// BuildKit's own Dockerfile frontend. It is a package of its own so that
// the deps package's tests and fuzz targets do not build BuildKit's whole
// frontend (gRPC, containerd, ...).
package buildkitref_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerui"
	digest "github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
	"gitlab.com/depsd/depsd/deps"
)

// recordingResolver is the image metadata resolver handed to BuildKit's
// converter: it answers every image with a one-layer config and records
// the reference BuildKit asked for. Those references are exactly the
// images a build would pull.
type recordingResolver struct {
	mu   sync.Mutex
	refs map[string]bool
}

func (r *recordingResolver) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	r.mu.Lock()
	r.refs[ref] = true
	r.mu.Unlock()
	cfg := `{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":["sha256:` + strings.Repeat("ab", 32) + `"]}}`
	return ref, "", []byte(cfg), nil
}

// buildkitImages is the reference: BuildKit's own Dockerfile frontend
// (dockerfile2llb.Dockerfile2LLB, v0.34.2, the version depsd's parser
// comes from) converts the file to LLB for platform p, as `docker buildx
// build` on a host of that platform does with default build args, with
// AllStages set so that every stage is converted, not only those the last
// one needs, once for the default target and once for each named stage
// (see below). Every image whose metadata it resolves (FROM, COPY --from and
// RUN --mount from= images, ONBUILD triggers of stages used as bases) is a
// dependency; stages, scratch and COPY --from=scratch are not resolved.
func buildkitImages(src []byte, p ocispecs.Platform) ([]string, error) {
	res := &recordingResolver{refs: map[string]bool{}}
	// BuildKit runs the ONBUILD triggers of a base stage only in the stages
	// the target needs, even with AllStages: when there are any, convert
	// for every named target too, and take the union.
	// TARGETSTAGE stays the default target's, as depsd reads the file.
	targets, defaultTarget := []string{""}, "default"
	if list, err := dockerfile2llb.ListTargets(context.Background(), src); err == nil {
		onbuild := bytes.Contains(bytes.ToUpper(src), []byte("ONBUILD"))
		for _, t := range list.Targets {
			if onbuild {
				targets = append(targets, t.Name)
			}
			if t.Default {
				defaultTarget = t.Name
			}
		}
	}
	for _, target := range targets {
		main := llb.Local("context")
		_, err := dockerfile2llb.Dockerfile2LLB(context.Background(), src, dockerfile2llb.ConvertOpt{
			Config: dockerui.Config{
				BuildPlatforms: []ocispecs.Platform{p},
				Target:         target,
				BuildArgs:      map[string]string{"TARGETSTAGE": defaultTarget},
			},
			TargetPlatform: &p,
			MainContext:    &main,
			MetaResolver:   res,
			AllStages:      true,
		})
		if err != nil {
			return nil, err
		}
	}
	var out []string
	for r := range res.refs {
		out = append(out, r)
	}
	sort.Strings(out)
	return out, nil
}

// referenceCase is one file of the differential test.
type referenceCase struct {
	name string
	src  []byte
}

// referenceCorpus is the files compared: the realistic multi-stage build
// files of testdata/buildkit, the table cases of testdata/containerfiles
// that are meant to build, and generated files.
func referenceCorpus(t testing.TB, generated int) []referenceCase {
	var out []referenceCase
	for _, glob := range []string{"../testdata/buildkit/*.Dockerfile", "../testdata/containerfiles/*.Containerfile"} {
		files, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, referenceCase{name: f, src: src})
		}
	}
	rng := rand.New(rand.NewPCG(14, 2026))
	for i := range generated {
		out = append(out, referenceCase{name: fmt.Sprintf("generated-%03d", i), src: []byte(generateContainerfile(rng))})
	}
	return out
}

// Outcome classes of the comparison.
const (
	outcomeAgree        = "agree"
	outcomeBothRefuse   = "both refuse the file"
	outcomeFromVariable = "COPY/RUN --mount from=$VAR: depsd expands it as podman does (with a warning), BuildKit refuses the file"
	outcomeNoDefault    = "variable without a value: BuildKit builds with it empty, depsd leaves the reference unresolved, keeping its repository (with a warning)"
	outcomeNoValueFails = "variable without a value: BuildKit refuses the file (empty or invalid name), depsd leaves the reference unresolved (with a warning)"
	outcomeBadReference = "invalid or empty reference: BuildKit refuses the file, depsd warns and goes on"
	outcomeOnbuild      = "ONBUILD trigger of a stage used as base by an unnamed stage no target builds: depsd counts it, BuildKit never runs it"
	outcomeHostCase     = "upper-case registry host: depsd writes it in lower case (a DNS name), BuildKit as written"
	outcomeUnexplained  = "unexplained"
	referenceGenerated  = 400
)

// compareWithBuildKit classifies one file, with a description of any
// difference.
func compareWithBuildKit(src []byte, p deps.Platform) (string, string) {
	want, bkErr := buildkitImages(src, ocispecs.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant})
	a, depErr := deps.AnalyzeContainerfile("Dockerfile", src, deps.Options{Platforms: []deps.Platform{p}})
	if bkErr != nil || depErr != nil {
		switch {
		case bkErr != nil && depErr != nil:
			return outcomeBothRefuse, ""
		case depErr == nil && (strings.Contains(bkErr.Error(), "variable expansion is not supported for --from") || strings.Contains(bkErr.Error(), "doesn't support variable expansion")):
			if hasWarning(a, "as podman does") || hasWarning(a, "--from=$") || hasWarning(a, "--from=${") {
				return outcomeFromVariable, ""
			}
		case depErr == nil && (strings.Contains(bkErr.Error(), "failed to parse stage name") || strings.Contains(bkErr.Error(), "should not be blank")):
			if hasWarning(a, "left unresolved") {
				return outcomeNoValueFails, ""
			}
			if hasWarning(a, "invalid image reference") || hasWarning(a, "empty reference") {
				return outcomeBadReference, ""
			}
		}
		return outcomeUnexplained, fmt.Sprintf("BuildKit error: %v; depsd error: %v", bkErr, depErr)
	}
	var got []string
	unresolvedRepos := map[string]bool{}
	for _, d := range a.Dependencies {
		if d.Image != "" {
			got = append(got, d.Image)
		} else {
			unresolvedRepos[d.Repository] = true
		}
	}
	got = sortedSet(got)
	if strings.Join(got, " ") == strings.Join(want, " ") && len(unresolvedRepos) == 0 {
		return outcomeAgree, ""
	}
	if strings.Join(got, " ") == strings.ToLower(strings.Join(want, " ")) && len(unresolvedRepos) == 0 {
		return outcomeHostCase, ""
	}
	diff := fmt.Sprintf("BuildKit %q, depsd %q (unresolved %v)", want, got, unresolvedRepos)
	inGot, inWant := map[string]bool{}, map[string]bool{}
	for _, g := range got {
		inGot[g] = true
	}
	for _, w := range want {
		inWant[w] = true
	}
	outcome := ""
	// An image BuildKit pulls that depsd did not resolve must be one whose
	// repository depsd kept, for a variable without a value.
	for _, w := range want {
		if inGot[w] {
			continue
		}
		img, err := deps.NormalizeImage(w)
		if err != nil || !unresolvedRepos[img.Repository] || !hasWarning(a, "left unresolved") {
			return outcomeUnexplained, diff
		}
		outcome = outcomeNoDefault
	}
	// An image depsd finds that BuildKit does not must come from an
	// ONBUILD trigger that runs in a stage no target builds.
	for _, g := range got {
		if inWant[g] {
			continue
		}
		if !onbuildImage(src, g) {
			return outcomeUnexplained, diff
		}
		if outcome == "" {
			outcome = outcomeOnbuild
		}
	}
	if outcome == "" {
		return outcomeUnexplained, diff
	}
	return outcome, ""
}

// onbuildImage reports whether img is named on an ONBUILD line of src.
func onbuildImage(src []byte, img string) bool {
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(strings.ToUpper(strings.TrimSpace(line)), "ONBUILD ") {
			continue
		}
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '=' || r == ',' }) {
			if n, err := deps.NormalizeImage(f); err == nil && n.Image == img {
				return true
			}
		}
	}
	return false
}

func hasWarning(a deps.FileAnalysis, part string) bool {
	for _, w := range a.Warnings {
		if strings.Contains(w.Message, part) {
			return true
		}
	}
	return false
}

func sortedSet(s []string) []string {
	m := map[string]bool{}
	var out []string
	for _, x := range s {
		if !m[x] {
			m[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// TestBuildKitDifferential compares depsd's dependencies with BuildKit's
// own conversion (buildkitImages) on every file of referenceCorpus, for
// linux/amd64 and linux/arm64 with default build args. The only
// differences allowed are the deliberate ones (see the outcome
// constants); the tally is what docs/dependencies.md quotes
// (go test ./deps -run BuildKitDifferential -v).
func TestBuildKitDifferential(t *testing.T) {
	corpus := referenceCorpus(t, referenceGenerated)
	for _, platform := range []string{"linux/amd64", "linux/arm64"} {
		t.Run(platform, func(t *testing.T) {
			p, err := deps.ParsePlatforms(platform)
			if err != nil {
				t.Fatal(err)
			}
			tally := map[string]int{}
			for _, c := range corpus {
				outcome, diff := compareWithBuildKit(c.src, p[0])
				tally[outcome]++
				if outcome == outcomeUnexplained {
					t.Errorf("%s: %s\n%s", c.name, diff, c.src)
				}
			}
			var lines []string
			for k, v := range tally {
				lines = append(lines, fmt.Sprintf("%5d  %s", v, k))
			}
			sort.Sort(sort.Reverse(sort.StringSlice(lines)))
			t.Logf("%d files compared with BuildKit's dockerfile2llb (%s):\n%s", len(corpus), platform, strings.Join(lines, "\n"))
			if tally[outcomeAgree]+tally[outcomeBothRefuse] < len(corpus)*9/10 {
				t.Errorf("only %d of %d files agree", tally[outcomeAgree]+tally[outcomeBothRefuse], len(corpus))
			}
		})
	}
}

// generateContainerfile writes a random multi-stage Containerfile from the
// patterns real build files use: platform ARGs in stage names and in
// ${VAR:+...}/${VAR:-...}, empty and missing defaults, stages named like
// images, COPY --from and RUN --mount by stage name, index and image,
// scratch, ONBUILD, and ENV lines that no dependency uses.
func generateContainerfile(rng *rand.Rand) string {
	var b strings.Builder
	pick := func(opts ...string) string { return opts[rng.IntN(len(opts))] }
	chance := func(n int) bool { return rng.IntN(100) < n }
	hexDigest := "sha256:" + strings.Repeat("0123456789abcdef", 4)

	b.WriteString("ARG ALPINE_VERSION=3.20\nARG REG=registry.example.com/infra/images\n")
	if chance(50) {
		b.WriteString("ARG T=\n")
	} else {
		b.WriteString("ARG T=-r1\n")
	}
	b.WriteString(pick("ARG DIGEST=\"\"\n", "ARG DIGEST="+hexDigest+"\n"))
	if chance(30) {
		b.WriteString("ARG TARGETARCH\n")
	}
	if chance(20) {
		b.WriteString("ARG NODEF\n")
	}
	b.WriteString("ARG VSUFFIX=${TARGETVARIANT:+-$TARGETVARIANT}\n")

	type st struct{ name string }
	var stages []st
	n := 1 + rng.IntN(5)
	for i := range n {
		var from string
		switch k := rng.IntN(12); {
		case k == 0:
			from = "scratch"
		case k == 1 && len(stages) > 0 && stages[len(stages)-1].name != "":
			from = stages[len(stages)-1].name
		case k == 2:
			from = "${REG}/base:1$T"
		case k == 3:
			from = "quay.io/libpod/busybox${TARGETARCH:+@" + hexDigest + "}"
		case k == 4:
			from = "busybox:${TARGETARCH:-latest}"
		case k == 5:
			from = "${REG}/x:1${DIGEST:+@${DIGEST}}"
		case k == 6:
			from = "golang:1.22${VSUFFIX}"
		case k == 7:
			from = "${REG}/tool-${TARGETARCH}:2"
		case k == 8 && strings.Contains(b.String(), "ARG NODEF"):
			from = "${REG}/nodef:1${NODEF}"
		case k == 9 && len(stages) > 0:
			// a platform-named stage chosen by the platform ARGs
			from = "plat-$TARGETOS"
		default:
			from = "alpine:${ALPINE_VERSION}"
		}
		if from == "plat-$TARGETOS" && !strings.Contains(b.String(), " AS plat-linux\n") {
			b.WriteString("FROM scratch AS plat-linux\nCOPY x /x\n")
			stages = append(stages, st{"plat-linux"})
		}
		name := ""
		if chance(70) {
			name = pick(fmt.Sprintf("s%d", i), fmt.Sprintf("S%d", i), "debian", fmt.Sprintf("bin-%d", i))
			if strings.Contains(b.String(), " AS "+name+"\n") || strings.EqualFold(name, "debian") && strings.Contains(strings.ToLower(b.String()), " as debian\n") {
				name = fmt.Sprintf("s%d-b", i)
			}
		}
		if name == "debian" && chance(50) {
			from = "debian:bookworm"
		}
		b.WriteString("FROM " + pick("", "--platform=$BUILDPLATFORM ") + from)
		if name != "" {
			b.WriteString(" AS " + name)
		}
		b.WriteString("\n")
		for range rng.IntN(5) {
			switch rng.IntN(11) {
			case 0:
				b.WriteString("ENV PATH=/opt/bin:$PATH\n")
			case 1:
				b.WriteString("ENV GOFLAGS=\"\"\n")
			case 2:
				b.WriteString("ARG V\nENV V=${V}\n")
			case 3:
				if len(stages) > 0 {
					s := stages[rng.IntN(len(stages))]
					if s.name != "" && chance(60) {
						b.WriteString("COPY --from=" + s.name + " /x /x\n")
					} else {
						b.WriteString(fmt.Sprintf("COPY --from=%d /x /x\n", rng.IntN(len(stages))))
					}
				}
			case 4:
				b.WriteString("COPY --from=scratch / /\n")
			case 5:
				b.WriteString(fmt.Sprintf("COPY --from=registry.example.com/tools/cli:%d /cli /cli\n", rng.IntN(3)))
			case 6:
				if len(stages) > 0 && stages[len(stages)-1].name != "" {
					b.WriteString("RUN --mount=type=bind,from=" + stages[len(stages)-1].name + ",target=/m true\n")
				}
			case 7:
				b.WriteString("RUN --mount=type=bind,from=registry.example.com/tools/m:1,target=/m --mount=type=cache,target=/c true\n")
			case 8:
				b.WriteString("ONBUILD COPY --from=registry.example.com/tools/onbuild:1 / /\n")
			case 9:
				b.WriteString("ARG TARGETOS\nRUN echo $TARGETOS\n")
			default:
				b.WriteString("RUN true\n")
			}
		}
		stages = append(stages, st{strings.ToLower(name)})
	}
	return b.String()
}

// BenchmarkAnalyzeContainerfile measures depsd's analysis over the
// reference corpus: files/s of wall time, and files per second of CPU
// time of the process, which a machine shared with other work does not
// distort (the figure in docs/dependencies.md).
func BenchmarkAnalyzeContainerfile(b *testing.B) {
	corpus := referenceCorpus(b, referenceGenerated)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	n := 0
	start := cpu()
	for b.Loop() {
		for _, c := range corpus {
			_, _ = deps.AnalyzeContainerfile("Dockerfile", c.src, deps.Options{})
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "files/s")
	b.ReportMetric(float64(n)/(cpu()-start).Seconds(), "files/cpu-s")
}
