package verify_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/verify"
)

// Images for the tests, built as a build tool would: OCI media types, a
// config naming the platform, gzip layers of real tar files, and the base
// annotations buildah and podman build write (or not).

var (
	amd64 = deps.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = deps.Platform{OS: "linux", Architecture: "arm64"}
)

// layerTar is a tar holding one file with content (compressible, so that
// two gzip levels give two different blobs).
func layerTar(t *testing.T, content string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := strings.Repeat(content+"\n", 200)
	if err := tw.WriteHeader(&tar.Header{Name: "etc/" + strings.ReplaceAll(content, "/", "-"), Mode: 0o644, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// layerOf compresses an uncompressed tar at a gzip level.
func layerOf(t *testing.T, tarball_ []byte, level int) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarball_)), nil },
		tarball.WithCompressionLevel(level), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func layer(t *testing.T, content string) v1.Layer {
	return layerOf(t, layerTar(t, content), gzip.DefaultCompression)
}

// image is an OCI image for p with layers.
func image(t *testing.T, p deps.Platform, layers ...v1.Layer) v1.Image {
	t.Helper()
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.AppendLayers(img, layers...); err != nil {
		t.Fatal(err)
	}
	return img
}

// built is an image built on base: base's layers plus one of its own,
// annotated with baseDigest when annotate (as buildah does).
func built(t *testing.T, p deps.Platform, base v1.Image, own string, annotate bool, baseDigest string) v1.Image {
	t.Helper()
	ls, err := base.Layers()
	if err != nil {
		t.Fatal(err)
	}
	img := image(t, p, append(ls, layer(t, own))...)
	if annotate {
		img = annotated(img, baseDigest)
	}
	return img
}

func annotated(img v1.Image, baseDigest string) v1.Image {
	return mutate.Annotations(img, map[string]string{
		verify.BaseDigestAnnotation: baseDigest,
		verify.BaseNameAnnotation:   "the-base",
	}).(v1.Image)
}

// recompressed is img with every layer recompressed without compression:
// the same diff_ids, other blob digests.
func recompressed(t *testing.T, img v1.Image) []v1.Layer {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Layer
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, layerOf(t, raw, gzip.NoCompression))
	}
	return out
}

func digestOf(t *testing.T, d interface{ Digest() (v1.Hash, error) }) string {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

func push(t *testing.T, ref string, img v1.Image) string {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return digestOf(t, img)
}

// pushIndex pushes a multi-platform image; it returns the index digest.
func pushIndex(t *testing.T, ref string, imgs map[deps.Platform]v1.Image) string {
	t.Helper()
	var adds []mutate.IndexAddendum
	for p, img := range imgs {
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return digestOf(t, idx)
}

func layerDigests(t *testing.T, img v1.Image) []string {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range m.Layers {
		out = append(out, l.Digest.String())
	}
	return out
}

func writeAuth(t *testing.T, path, host, userpass string) {
	t.Helper()
	data := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte(userpass)))
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
