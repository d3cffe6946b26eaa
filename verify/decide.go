package verify

import (
	"fmt"
	"slices"
)

// Read is what verification knows of one image for one platform.
type Read struct {
	// Digest is the digest the image was named by or resolved to (an
	// index or a manifest); Manifest is the platform's manifest digest
	// (equal to Digest for a single-platform image).
	Digest   string
	Manifest string
	// Annotated: the manifest carries org.opencontainers.image.base.digest
	// (BaseDigest, possibly empty: FROM scratch).
	Annotated  bool
	BaseDigest string
	// DiffIDs are the config's rootfs.diff_ids: the uncompressed layers,
	// which a push that recompresses does not change. Nil when not read.
	DiffIDs []string
}

// names reports whether digest names this image (its index or its
// platform's manifest).
func (r Read) names(digest string) bool {
	return digest != "" && (digest == r.Digest || digest == r.Manifest)
}

// layersUnder reports whether r's layers are a prefix of the image's:
// the image was built on r (or on an image with r's exact layers).
func (r Read) layersUnder(image []string) bool {
	return len(r.DiffIDs) > 0 && len(r.DiffIDs) <= len(image) && slices.Equal(r.DiffIDs, image[:len(r.DiffIDs)])
}

// Decide judges image against one upstream: current is the upstream's
// current image, earlier the images it had before, newest first (an
// earlier Read may hold only its Digest when it could not be read: it
// then matches by annotation only). In order:
//
//   - the base annotation names current (index or platform manifest): fresh;
//   - current's diff_ids are a prefix of the image's: fresh;
//   - the annotation names an earlier image: stale;
//   - an earlier image's diff_ids are a prefix of the image's: stale (the
//     longest such prefix: the most recent base that fits);
//   - otherwise unknown: FROM scratch (empty annotation), an annotation
//     naming a digest never recorded, or neither annotation nor a shared
//     prefix.
//
// Compressed layer digests are never compared: a registry or a push may
// recompress the same layers.
func Decide(upstream string, image, current Read, earlier []Read) Verdict {
	v := Verdict{Upstream: upstream, Current: current.Digest}
	switch {
	case image.Annotated && current.names(image.BaseDigest):
		return v.fresh(ByAnnotation, fmt.Sprintf("built on %s %s, its current image (base annotation)", upstream, short(image.BaseDigest)))
	case current.layersUnder(image.DiffIDs):
		return v.fresh(ByLayers, fmt.Sprintf("built on %s %s, its current image (%s)", upstream, short(current.Digest), firstLayers(len(current.DiffIDs))))
	}
	if image.Annotated && image.BaseDigest != "" {
		for _, e := range earlier {
			if e.names(image.BaseDigest) {
				return v.stale(ByAnnotation, e.Digest, upstream, current.Digest, "base annotation")
			}
		}
	}
	var best *Read
	for i, e := range earlier {
		if e.layersUnder(image.DiffIDs) && (best == nil || len(e.DiffIDs) > len(best.DiffIDs)) {
			best = &earlier[i]
		}
	}
	if best != nil {
		return v.stale(ByLayers, best.Digest, upstream, current.Digest, firstLayers(len(best.DiffIDs)))
	}
	v.State = StateUnknown
	switch {
	case image.Annotated && image.BaseDigest == "":
		v.Reason = ReasonScratch
		v.Detail = fmt.Sprintf("the base annotation is empty: the built stage is FROM scratch, not %s", upstream)
	case image.Annotated:
		v.Reason = ReasonUnrecordedBase
		v.Detail = fmt.Sprintf("built on %s, which is neither %s's current image %s nor one depsd recorded for it, and no layers are shared", short(image.BaseDigest), upstream, short(current.Digest))
	default:
		v.Reason = ReasonNoBase
		v.Detail = fmt.Sprintf("no base annotation, and %s's current layers are not the image's first: squashed, or built on a base depsd never recorded by a tool that does not annotate", upstream)
	}
	return v
}

func (v Verdict) fresh(by, detail string) Verdict {
	v.State, v.By, v.BuiltOn, v.Detail = StateFresh, by, v.Current, detail
	return v
}

func (v Verdict) stale(by, builtOn, upstream, current, how string) Verdict {
	v.State, v.By, v.BuiltOn = StateStale, by, builtOn
	v.Detail = fmt.Sprintf("built on %s %s, not %s (%s)", upstream, short(builtOn), short(current), how)
	return v
}

// Sum gives an image's state from its verdicts: stale when any is stale,
// else pinned when any is, fresh when all are (and there is at least
// one), unknown otherwise; the detail is the first verdict that decided
// it.
func Sum(verdicts []Verdict) (State, string) {
	for _, worst := range []State{StateStale, StatePinned} {
		for _, v := range verdicts {
			if v.State == worst {
				return worst, v.Detail
			}
		}
	}
	for _, v := range verdicts {
		if v.State != StateFresh {
			return StateUnknown, v.Detail
		}
	}
	if len(verdicts) == 0 {
		return StateUnknown, "no upstream image to judge against"
	}
	return StateFresh, "built on the current image of every upstream"
}

// firstLayers says that an upstream's n layers start the image.
func firstLayers(n int) string {
	if n == 1 {
		return "its layer is the image's first"
	}
	return fmt.Sprintf("its %d layers are the image's first", n)
}

// short cuts a digest for a sentence: sha256:0123456789ab.
func short(digest string) string {
	if len(digest) > len("sha256:")+12 {
		return digest[:len("sha256:")+12]
	}
	return digest
}
