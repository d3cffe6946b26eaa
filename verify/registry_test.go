package verify_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/verify"
)

// Against the real registry: an upstream (base/ruby) pushed twice, and
// downstream images built on one or the other in each way a build tool
// can leave them.
func TestVerifyAgainstRegistry(t *testing.T) {
	host := registrytest.Start(t)
	ruby := host + "/base/ruby:3"
	oldRuby := image(t, amd64, layer(t, "debian 12.1"), layer(t, "ruby 3.3.0"))
	oldDigest := push(t, ruby, oldRuby)
	curRuby := image(t, amd64, layer(t, "debian 12.2"), layer(t, "ruby 3.3.1"))
	curDigest := push(t, ruby, curRuby)
	up := verify.Upstream{Image: ruby, Current: curDigest, Earlier: []string{oldDigest}}

	recompressedShop := image(t, amd64, append(recompressed(t, curRuby), layer(t, "shop"))...)
	if a, b := layerDigests(t, recompressedShop), layerDigests(t, curRuby); a[0] == b[0] {
		t.Fatalf("recompressing kept the blob digest %s: the case tests nothing", a[0])
	}

	closed := registrytest.ClosedAddr(t)
	v := verify.New(registry.New(registry.Options{Insecure: []string{host, closed}}), verify.Options{})
	for _, tc := range []struct {
		name     string
		img      v1.Image // pushed under the case's tag
		ref      string   // read as it is, when img is nil
		upstream *verify.Upstream
		state    verify.State
		reason   verify.Reason
		by       string
		builtOn  string
	}{
		{name: "fresh by annotation", img: built(t, amd64, curRuby, "shop", true, curDigest),
			state: verify.StateFresh, by: verify.ByAnnotation, builtOn: curDigest},
		{name: "fresh by layers without annotation", img: built(t, amd64, curRuby, "shop", false, ""),
			state: verify.StateFresh, by: verify.ByLayers, builtOn: curDigest},
		{name: "fresh with its base's layers recompressed", img: recompressedShop,
			state: verify.StateFresh, by: verify.ByLayers, builtOn: curDigest},
		{name: "stale by annotation", img: built(t, amd64, oldRuby, "shop", true, oldDigest),
			state: verify.StateStale, by: verify.ByAnnotation, builtOn: oldDigest},
		{name: "stale by layers", img: built(t, amd64, oldRuby, "shop", false, ""),
			state: verify.StateStale, by: verify.ByLayers, builtOn: oldDigest},
		{name: "squashed", img: image(t, amd64, layer(t, "debian, ruby and shop in one")),
			state: verify.StateUnknown, reason: verify.ReasonNoBase},
		{name: "FROM scratch", img: annotated(image(t, amd64, layer(t, "static binary")), ""),
			state: verify.StateUnknown, reason: verify.ReasonScratch},
		{name: "built for another platform", img: built(t, arm64, curRuby, "shop", true, curDigest),
			state: verify.StateUnknown, reason: verify.ReasonNoPlatform},
		{name: "tag not found", ref: host + "/apps/shop:never-pushed",
			state: verify.StateUnknown, reason: verify.ReasonNotFound},
		{name: "upstream digest not found", img: built(t, amd64, curRuby, "shop", true, curDigest),
			upstream: &verify.Upstream{Image: ruby, Current: "sha256:" + strings.Repeat("f", 64)},
			state:    verify.StateUnknown, reason: verify.ReasonNotFound},
		{name: "registry down", ref: closed + "/apps/shop:1",
			state: verify.StateUnknown, reason: verify.ReasonUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := tc.ref
			if tc.img != nil {
				ref = host + "/apps/shop:" + strings.NewReplacer(" ", "-", "'", "").Replace(tc.name)
				push(t, ref, tc.img)
			}
			u := up
			if tc.upstream != nil {
				u = *tc.upstream
			}
			res := v.Verify(t.Context(), verify.Request{Image: ref, Platform: amd64, Upstreams: []verify.Upstream{u}})
			if len(res.Upstreams) != 1 {
				t.Fatalf("%d verdicts, want 1: %+v", len(res.Upstreams), res)
			}
			got := res.Upstreams[0]
			if res.State != tc.state || got.State != tc.state || got.Reason != tc.reason || got.By != tc.by {
				t.Errorf("%s: %s/%s by %q (%s); want %s/%s by %q", ref, got.State, got.Reason, got.By, got.Detail, tc.state, tc.reason, tc.by)
			}
			if got.BuiltOn != tc.builtOn {
				t.Errorf("built on %q, want %q", got.BuiltOn, tc.builtOn)
			}
			if tc.img != nil && tc.upstream == nil && tc.reason != verify.ReasonNoPlatform && res.Digest != digestOf(t, tc.img) {
				t.Errorf("image digest %s, want the pushed %s", res.Digest, digestOf(t, tc.img))
			}
			if got.State == verify.StateUnknown && (got.Detail == "" || res.Detail == "") {
				t.Errorf("unknown without a reason an operator can read: %+v", res)
			}
		})
	}
}

// A multi-platform image is judged per platform against the same
// platform of a multi-platform upstream, whose annotation may name the
// index or the platform's manifest.
func TestVerifyMultiPlatform(t *testing.T) {
	host := registrytest.Start(t)
	ruby := host + "/base/ruby:3"
	oldAMD, oldARM := image(t, amd64, layer(t, "amd64 ruby 1")), image(t, arm64, layer(t, "arm64 ruby 1"))
	oldIdx := pushIndex(t, ruby, map[deps.Platform]v1.Image{amd64: oldAMD, arm64: oldARM})
	curAMD, curARM := image(t, amd64, layer(t, "amd64 ruby 2")), image(t, arm64, layer(t, "arm64 ruby 2"))
	curIdx := pushIndex(t, ruby, map[deps.Platform]v1.Image{amd64: curAMD, arm64: curARM})

	shop := host + "/apps/shop:1"
	shopIdx := pushIndex(t, shop, map[deps.Platform]v1.Image{
		amd64: built(t, amd64, curAMD, "shop", true, digestOf(t, curAMD)), // the platform's manifest
		arm64: built(t, arm64, oldARM, "shop", false, ""),                 // an old base, no annotation
	})
	v := verify.New(registry.New(registry.Options{Insecure: []string{host}}), verify.Options{})
	up := []verify.Upstream{{Image: ruby, Current: curIdx, Earlier: []string{oldIdx}}}
	for _, tc := range []struct {
		platform deps.Platform
		state    verify.State
		reason   verify.Reason
		builtOn  string
	}{
		{amd64, verify.StateFresh, "", curIdx},
		{arm64, verify.StateStale, "", oldIdx},
		{deps.Platform{OS: "linux", Architecture: "s390x"}, verify.StateUnknown, verify.ReasonNoPlatform, ""},
	} {
		t.Run(tc.platform.String(), func(t *testing.T) {
			res := v.Verify(t.Context(), verify.Request{Image: shop, Platform: tc.platform, Upstreams: up})
			got := res.Upstreams[0]
			if res.State != tc.state || got.Reason != tc.reason || got.BuiltOn != tc.builtOn {
				t.Errorf("%s: %s/%s built on %q (%s); want %s/%s on %q", tc.platform, res.State, got.Reason, got.BuiltOn, got.Detail, tc.state, tc.reason, tc.builtOn)
			}
			if tc.state != verify.StateUnknown && (res.Digest != shopIdx || res.Manifest == shopIdx || res.Manifest == "") {
				t.Errorf("digests %s / %s, want the index %s and its platform's manifest", res.Digest, res.Manifest, shopIdx)
			}
		})
	}
}

// counting counts the requests sent to a registry, by repository.
type counting struct {
	mu    sync.Mutex
	next  http.RoundTripper
	pings int
	repos map[string]int // "base/ruby" → requests under /v2/base/ruby/
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if r.URL.Path == "/v2/" {
		// go-containerregistry tries https first, which a plain-HTTP
		// registry never sees: only the http ping reaches it.
		if r.URL.Scheme == "http" {
			c.pings++
		}
	} else if rest, ok := strings.CutPrefix(r.URL.Path, "/v2/"); ok {
		for _, kind := range []string{"/manifests/", "/blobs/"} {
			if i := strings.Index(rest, kind); i > 0 {
				c.repos[rest[:i]]++
			}
		}
	}
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *counting) count(repo string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.repos[repo]
}

// At most 3 requests per image and platform (index, platform manifest,
// config), the upstream read once for many downstreams, and a
// re-verification of an unchanged image costs its tag alone.
func TestVerifyRequestCount(t *testing.T) {
	host := registrytest.Start(t)
	ruby := host + "/base/ruby:3"
	curAMD, curARM := image(t, amd64, layer(t, "amd64 ruby")), image(t, arm64, layer(t, "arm64 ruby"))
	curIdx := pushIndex(t, ruby, map[deps.Platform]v1.Image{amd64: curAMD, arm64: curARM})
	apps := []string{"apps/a", "apps/b", "apps/c"}
	for _, app := range apps {
		pushIndex(t, host+"/"+app+":1", map[deps.Platform]v1.Image{
			amd64: built(t, amd64, curAMD, app, false, ""),
			arm64: built(t, arm64, curARM, app, false, ""),
		})
	}
	c := &counting{next: http.DefaultTransport, repos: map[string]int{}}
	v := verify.New(registry.New(registry.Options{Insecure: []string{host}, Transport: c}), verify.Options{})
	up := []verify.Upstream{{Image: ruby, Current: curIdx}}
	for _, p := range []deps.Platform{amd64, arm64} {
		for _, app := range apps {
			before := c.count(app)
			res := v.Verify(t.Context(), verify.Request{Image: host + "/" + app + ":1", Platform: p, Upstreams: up})
			if res.State != verify.StateFresh {
				t.Fatalf("%s %s: %s (%s)", app, p, res.State, res.Detail)
			}
			// The tag is read again for the second platform (it may
			// have moved); the platform's manifest and config are new.
			if n := c.count(app) - before; n > 3 {
				t.Errorf("%s %s: %d requests, want at most 3", app, p, n)
			}
		}
	}
	if n := c.count("base/ruby"); n != 1+2+2 { // index, then per platform: manifest and config
		t.Errorf("upstream read with %d requests for 6 verifications, want 5: each digest once", n)
	}
	before := c.count("apps/a")
	v.Verify(t.Context(), verify.Request{Image: host + "/apps/a:1", Platform: amd64, Upstreams: up})
	if n := c.count("apps/a") - before; n != 1 {
		t.Errorf("re-verification of an unchanged image: %d requests, want 1 (the tag)", n)
	}
	if c.pings > 4 {
		t.Errorf("%d pings of /v2/ for 4 repositories: the auth handshake is not reused", c.pings)
	}
}

// A registry that never answers costs the verification its timeout, then
// the verdict is unknown, unreachable.
func TestVerifyTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	v := verify.New(registry.New(registry.Options{Insecure: []string{host}}), verify.Options{Timeout: 50 * time.Millisecond})
	res := v.Verify(t.Context(), verify.Request{Image: host + "/apps/shop:1", Platform: amd64,
		Upstreams: []verify.Upstream{{Image: host + "/base/ruby:3"}}})
	if res.State != verify.StateUnknown || res.Reason != verify.ReasonUnreachable || !strings.Contains(res.Detail, "no answer within 50ms") {
		t.Errorf("%s/%s (%s), want unknown, unreachable, no answer within 50ms", res.State, res.Reason, res.Detail)
	}
	if len(res.Upstreams) != 1 || res.Upstreams[0].Reason != verify.ReasonUnreachable {
		t.Errorf("verdicts %+v, want the upstream unknown too", res.Upstreams)
	}
}

// A registry refusing depsd's credentials: unauthorized, and the
// credentials never show in the verdict.
func TestVerifyUnauthorized(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	auth := t.TempDir() + "/auth.json"
	writeAuth(t, auth, host, "depsd:s3cret-p4ss")
	v := verify.New(registry.New(registry.Options{AuthFile: auth, Insecure: []string{host}}), verify.Options{})
	res := v.Verify(t.Context(), verify.Request{Image: host + "/apps/shop:1", Platform: amd64,
		Upstreams: []verify.Upstream{{Image: host + "/base/ruby:3"}}})
	if res.State != verify.StateUnknown || res.Reason != verify.ReasonUnauthorized {
		t.Errorf("%s/%s (%s), want unknown, unauthorized", res.State, res.Reason, res.Detail)
	}
	if strings.Contains(res.Detail, "s3cret") || strings.Contains(res.Detail, "ZGVwc2Q6czNjcmV0") {
		t.Errorf("the detail leaks the credentials: %s", res.Detail)
	}
}

// Concurrent verifications against one upstream share its reads: the
// upstream's index, manifest and config are each fetched once.
func TestConcurrentVerificationsShareUpstreamReads(t *testing.T) {
	host := registrytest.Start(t)
	ruby := host + "/base/ruby:3"
	cur := image(t, amd64, layer(t, "ruby"))
	curIdx := pushIndex(t, ruby, map[deps.Platform]v1.Image{amd64: cur})
	const n = 8
	for i := range n {
		push(t, fmt.Sprintf("%s/apps/app%d:1", host, i), built(t, amd64, cur, fmt.Sprint(i), true, curIdx))
	}
	c := &counting{next: http.DefaultTransport, repos: map[string]int{}}
	v := verify.New(registry.New(registry.Options{Insecure: []string{host}, Transport: c}), verify.Options{})
	up := []verify.Upstream{{Image: ruby, Current: curIdx}}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res := v.Verify(t.Context(), verify.Request{Image: fmt.Sprintf("%s/apps/app%d:1", host, i), Platform: amd64, Upstreams: up})
			if res.State != verify.StateFresh {
				t.Errorf("app%d: %s (%s)", i, res.State, res.Detail)
			}
		})
	}
	wg.Wait()
	if got := c.count("base/ruby"); got != 3 {
		t.Errorf("upstream read with %d requests by %d concurrent verifications, want 3 (index, manifest, config once)", got, n)
	}
}

// The upstream's current image is read while the image is, not before
// or after it: a verification waits for one chain of reads, not two (at
// 20 ms a request, 40 ms instead of 60 on the chain's critical path:
// BenchmarkVerificationCost). The requests for the image's tag and the
// upstream's are each held until the other was made.
func TestVerifyReadsUpstreamWhileImage(t *testing.T) {
	host := registrytest.Start(t)
	ruby := host + "/base/ruby:3"
	cur := image(t, amd64, layer(t, "ruby"))
	curDigest := push(t, ruby, cur)
	push(t, host+"/apps/shop:1", built(t, amd64, cur, "shop", true, curDigest))
	r := &rendezvous{next: http.DefaultTransport, arrived: map[string]chan struct{}{
		"/v2/apps/shop/manifests/1": make(chan struct{}), "/v2/base/ruby/manifests/3": make(chan struct{})}}
	v := verify.New(registry.New(registry.Options{Insecure: []string{host}, Transport: r}), verify.Options{})
	res := v.Verify(t.Context(), verify.Request{Image: host + "/apps/shop:1", Platform: amd64,
		Upstreams: []verify.Upstream{{Image: ruby}}})
	if res.State != verify.StateFresh {
		t.Errorf("%s (%s), want fresh", res.State, res.Detail)
	}
	if n := r.met.Load(); n != 2 {
		t.Errorf("%d of the image's and the upstream's tag requests met the other in flight, want 2: the reads are one after the other", n)
	}
}

// rendezvous holds each request for a path of arrived until a request
// for every other path of arrived was made (or 10 s passed: then they
// were not made at once), and counts those that met the others.
type rendezvous struct {
	next    http.RoundTripper
	arrived map[string]chan struct{} // closed at the first request for the path
	once    sync.Map                 // path → *sync.Once closing its arrived
	met     atomic.Int32
}

func (z *rendezvous) RoundTrip(r *http.Request) (*http.Response, error) {
	if c, ok := z.arrived[r.URL.Path]; ok {
		once, _ := z.once.LoadOrStore(r.URL.Path, new(sync.Once))
		once.(*sync.Once).Do(func() { close(c) })
		met := true
		timeout := time.After(10 * time.Second)
		for path, other := range z.arrived {
			if path == r.URL.Path {
				continue
			}
			select {
			case <-other:
			case <-timeout:
				met = false
			}
		}
		if met {
			z.met.Add(1)
		}
	}
	return z.next.RoundTrip(r)
}
