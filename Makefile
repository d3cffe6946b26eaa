# The one place that says how depsd is built and tested; .ci/run calls it.
# podman-executor is its own Go module (its podman dependencies cannot share
# a build list with BuildKit's); it builds without cgo and with these tags.
EXECUTOR_TAGS := remote exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_openpgp

.PHONY: test test-depsd test-executor vet build build-depsd release image man demo bench bench-capacity bench-capacity-record bench-capacity-short bench-scale bench-docs fuzz mutants soak e2e-real screenshots-real

# The version stamped into the binaries (depsd version, User-Agent, the
# depsd_build_info metric): the git tag, else the commit, "-dirty" for a
# tree with changes. Override: make release VERSION=v1.2.3.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
DEPSD_LDFLAGS := -s -w -X gitlab.com/depsd/depsd/buildinfo.version=$(VERSION) -X gitlab.com/depsd/depsd/buildinfo.revision=$(REVISION)
EXECUTOR_LDFLAGS := -s -w -X main.version=$(VERSION)
# Static binaries: modernc SQLite is pure Go, so nothing needs cgo.
GOBUILD := CGO_ENABLED=0 go build -trimpath
IMAGE ?= localhost/depsd:$(VERSION)

## test: vet and test both modules (the README's test command)
test: vet test-depsd test-executor

vet:
	gofmt -l . | (! grep .) || (echo "gofmt needed on the files above" && false)
	go vet ./...
	cd podman-executor && CGO_ENABLED=0 go vet -tags "$(EXECUTOR_TAGS)" ./...

test-depsd:
	go test -race -count=1 ./...
	# The chain engine's, the scheduler's and the daemon's liveness tests
	# once more on PostgreSQL (the store's own tests run on both backends in
	# the line above).
	DEPSD_TEST_STORE=postgres go test -count=1 ./chain/ ./scheduler/
	DEPSD_TEST_STORE=postgres go test -count=1 -run 'Liveness|CutOff' ./daemon/

test-executor:
	cd podman-executor && CGO_ENABLED=0 go test -count=1 -tags "$(EXECUTOR_TAGS)" ./...

## e2e-real: the image chain for real (docs/real-chain.md): base → ruby → app
## and a diamond built by buildah in jobs of the real GitLab Runner with
## podman-executor, pushed to docker-registry, ordered by depsd serve and
## verified. `make test` runs it too; this runs it alone, with its figures.
## Needs the podman service (eval "$$(.ci/podman.sh start)"), the job image
## (.ci/buildah-image.sh) and DEPSD_GITLAB_RUNNER (.ci/run sets all three).
e2e-real:
	go test -count=1 -v -run '^(TestRealChain|TestRealValidation|TestDemoReal)$$' ./e2e/

## screenshots-real: docs/screenshots/real-freshness.png and real-chain.png,
## the dashboard after the real chain's first chain, taken with headless
## Chromium by TestRealChain. Needs what e2e-real needs, and chromium.
screenshots-real:
	DEPSD_UPDATE_SCREENSHOTS=1 go test -count=1 -v -run '^TestRealChain$$' ./e2e/

## build: static depsd and podman-executor for this machine, in bin/
build: build-depsd
	cd podman-executor && $(GOBUILD) -tags "$(EXECUTOR_TAGS)" -ldflags "$(EXECUTOR_LDFLAGS)" -o ../bin/podman-executor ./cmd/podman-executor

build-depsd:
	$(GOBUILD) -ldflags "$(DEPSD_LDFLAGS)" -o bin/depsd ./cmd/depsd

## release: static binaries for linux/amd64 and linux/arm64, man pages and
## SHA256SUMS in bin/release/$(VERSION)
RELEASE_DIR := bin/release/$(VERSION)
release: man
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	for arch in amd64 arm64; do \
		GOOS=linux GOARCH=$$arch $(GOBUILD) -ldflags "$(DEPSD_LDFLAGS)" -o $(RELEASE_DIR)/depsd-linux-$$arch ./cmd/depsd || exit 1; \
		(cd podman-executor && GOOS=linux GOARCH=$$arch $(GOBUILD) -tags "$(EXECUTOR_TAGS)" -ldflags "$(EXECUTOR_LDFLAGS)" \
			-o ../$(RELEASE_DIR)/podman-executor-linux-$$arch ./cmd/podman-executor) || exit 1; \
	done
	tar -C bin -czf $(RELEASE_DIR)/depsd-man-$(VERSION).tar.gz man
	cd $(RELEASE_DIR) && sha256sum depsd-* podman-executor-* > SHA256SUMS && cat SHA256SUMS

## man: the man pages of depsd and its commands, from the --help texts
man:
	go run -ldflags "$(DEPSD_LDFLAGS)" ./cmd/depsd man bin/man/man1

## image: the depsd container image, built offline: the static binary and
## the host's CA certificates on an empty base (packaging/Containerfile)
CA_CERTS ?= /etc/ssl/certs/ca-certificates.crt
image: build-depsd
	rm -rf bin/image && mkdir -p bin/image/rootfs/etc/ssl/certs bin/image/rootfs/tmp bin/image/rootfs/var/lib/depsd
	cp bin/depsd bin/image/depsd
	cp $(CA_CERTS) bin/image/rootfs/etc/ssl/certs/ca-certificates.crt
	printf 'root:x:0:0:root:/root:/sbin/nologin\ndepsd:x:65532:65532:depsd:/var/lib/depsd:/sbin/nologin\n' > bin/image/rootfs/etc/passwd
	printf 'root:x:0:\ndepsd:x:65532:\n' > bin/image/rootfs/etc/group
	chmod 1777 bin/image/rootfs/tmp
	podman build --build-arg VERSION=$(VERSION) -f packaging/Containerfile -t $(IMAGE) bin/image
	@echo "built $(IMAGE)"

## bench: the benchmarks whose figures docs/benchmarks.md quotes (the whole-system
## ones in bench/ at depsd's default settings; about 100 minutes, 75 of them
## bench-capacity's), and those of
## docs/verification.md's Cost: BenchmarkVerificationCost in bench/ (a real
## docker-registry behind a 20 ms proxy, about 20 s) and depsd freshness at 2,000
## projects. Each result is recorded in docs/benchmarks.json (bench/benchdoc), then
## the table regenerated.
BENCHDOC = go run ./bench/benchdoc
bench:
	$(BENCHDOC) record -- go test -run '^$$' -bench . -benchmem ./deps/ ./deps/buildkitref/
	$(BENCHDOC) record -- go test -run '^$$' -bench . -skip '$(SCALE_BENCHES)|$(CAPACITY_BENCHES)' -benchtime 1x -timeout 30m ./bench/
	DEPSD_BENCH_STORE=postgres $(BENCHDOC) record -- go test -run '^$$' -bench 'StorageFloor|WebhookAck|SuccessToTrigger|RebuildBase2000' -benchtime 1x -timeout 30m ./bench/
	DEPSD_BENCH_REQUESTS_PER_MINUTE=-1 $(BENCHDOC) record -- go test -run '^$$' -bench 'RebuildBase2000' -benchtime 1x -timeout 30m ./bench/
	$(BENCHDOC) record -- go test -run '^$$' -bench 'Freshness.*2000' -benchtime 20x ./daemon/ ./cmd/depsd/
	$(BENCHDOC) record -- go test -run '^$$' -bench ApplyEvent -benchtime 400x ./chain/
	DEPSD_TEST_STORE=postgres $(BENCHDOC) record -- go test -run '^$$' -bench ApplyEvent -benchtime 400x ./chain/
	$(MAKE) bench-capacity-record
	$(MAKE) bench-docs

## bench-capacity: issue 40's figures, recorded (part of make bench; about
## 75 minutes, at most an hour and a half; most of it the saturation ramps, 60 s a rate, each stopping
## at the first rate that fails): the realistic mix's acknowledgement
## against the durable floor, CPU per delivery by kind and saturation on
## SQLite and on PostgreSQL (one depsd serve, in the benchmark's process,
## and again with depsd serve, the floor and the recording alone each a
## process of its own: DEPSD_BENCH_PROCESSES=separate),
## the replicas' CPU model and the saturation of one and of three
## `depsd serve` behind the round-robin proxy, the inbox's CPU per event on
## each path, and the mix's CPU by kind of main and of this tree in turns
## (scripts/bench-ab.sh). Then the table.
CAPACITY_BENCHES := WebhookMix|ReplicaCapacity
CAPACITY_FULL := DEPSD_BENCH_SATURATION_SECONDS=60
bench-capacity: bench-capacity-record bench-docs
# CAPACITY_AB_BASE: the build the capacity rows call "before": main as it was
# before issue 40's inbox work (the cheap path, batched marks, lock-free
# recording) merged.
CAPACITY_AB_BASE ?= 4d88d66
bench-capacity-record:
	$(CAPACITY_FULL) $(BENCHDOC) record -- go test -run '^$$' -bench 'WebhookMix' -benchtime 1x -timeout 60m ./bench/
	DEPSD_BENCH_STORE=postgres $(CAPACITY_FULL) $(BENCHDOC) record -- go test -run '^$$' -bench 'WebhookMix' -benchtime 1x -timeout 60m ./bench/
	DEPSD_BENCH_MIX_PARTS=sat DEPSD_BENCH_SATURATION_P99_MS=50 $(CAPACITY_FULL) $(BENCHDOC) record -- go test -run '^$$' -bench 'WebhookMix' -benchtime 1x -timeout 60m ./bench/
	DEPSD_BENCH_STORE=postgres DEPSD_BENCH_MIX_PARTS=sat DEPSD_BENCH_SATURATION_P99_MS=50 $(CAPACITY_FULL) $(BENCHDOC) record -- go test -run '^$$' -bench 'WebhookMix' -benchtime 1x -timeout 60m ./bench/
	DEPSD_BENCH_PROCESSES=separate $(CAPACITY_FULL) $(BENCHDOC) record -- go test -run '^$$' -bench 'WebhookMix' -benchtime 1x -timeout 60m ./bench/
	DEPSD_BENCH_PROCESSES=separate DEPSD_BENCH_STORE=postgres $(CAPACITY_FULL) $(BENCHDOC) record -- go test -run '^$$' -bench 'WebhookMix' -benchtime 1x -timeout 60m ./bench/
	$(CAPACITY_FULL) $(BENCHDOC) record -- go test -run '^$$' -bench 'ReplicaCapacity' -benchtime 1x -timeout 60m ./bench/
	$(BENCHDOC) record -- go test -run '^$$' -bench InboxByKind -benchtime 200x ./chain/
	DEPSD_BENCH_AB_BASE=$(CAPACITY_AB_BASE) DEPSD_BENCH_MIX_PARTS=cpu $(BENCHDOC) record -- scripts/bench-ab.sh

## bench-capacity-short: the same benchmarks at a tenth of their size and
## two saturation rates of 1 s, recorded nowhere: that they run (CI, about
## a minute). The figures mean nothing at this size.
CAPACITY_SHORT := DEPSD_BENCH_SCALE=0.1 DEPSD_BENCH_SATURATION_SECONDS=1 DEPSD_BENCH_SATURATION_RATES=250,500
bench-capacity-short:
	$(CAPACITY_SHORT) go test -run '^$$' -bench '$(CAPACITY_BENCHES)' -benchtime 1x -timeout 10m ./bench/
	DEPSD_BENCH_STORE=postgres $(CAPACITY_SHORT) DEPSD_BENCH_MIX_PARTS=ack,sat go test -run '^$$' -bench 'WebhookMix' -benchtime 1x -timeout 10m ./bench/
	DEPSD_BENCH_PROCESSES=separate $(CAPACITY_SHORT) go test -run '^$$' -bench 'WebhookMix' -benchtime 1x -timeout 10m ./bench/
	go test -run '^$$' -bench InboxByKind -benchtime 10x ./chain/

## bench-scale: issue 30's benchmarks at the sizes its goals name, at depsd's
## default settings (about 45 minutes; the times want a quiet machine):
## the rebuild of a base with 10,000 projects downstream on SQLite and on
## PostgreSQL, the peak memory of depsd scan and depsd serve at 50,000
## projects, the first scan of 10,000, and the dashboard's graph and
## Freshness pages at 10,000 in Chromium; the scan and the rebuild again
## with one extra followed branch on 10 % of the projects (issue 36:
## Scan10000Refs, RebuildBase10000Refs, on both stores). Recorded in
## docs/benchmarks.json like make bench's.
## DEPSD_BENCH_SCALE=0.1 runs the bench/ ones at a tenth of the size.
SCALE_BENCHES := RebuildBase10000|RebuildBase10000Refs|Memory50000|Scan10000|Scan10000Refs
bench-scale:
	$(BENCHDOC) record -- go test -run '^$$' -bench '$(SCALE_BENCHES)' -benchtime 1x -timeout 80m ./bench/
	DEPSD_BENCH_STORE=postgres $(BENCHDOC) record -- go test -run '^$$' -bench 'RebuildBase10000|RebuildBase10000Refs' -benchtime 1x -timeout 30m ./bench/
	$(BENCHDOC) record -- go test -run '^$$' -bench 'GraphPage10000|FreshnessPage10000' -benchtime 3x -timeout 20m ./dashboard/
	$(MAKE) bench-docs

## bench-docs: the benchmark table of docs/benchmarks.md, from docs/benchmarks.json
bench-docs:
	$(BENCHDOC) table

## mutants: break the code in known ways and check the tests fail (a few minutes)
mutants:
	scripts/mutants.sh

## fuzz: run each fuzz target of the parsers for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	for f in FuzzAnalyzeContainerfile FuzzParseGitLabDeps FuzzRegistryMap FuzzMovePins; do \
		go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./deps/ || exit 1; done
	go test -run '^$$' -fuzz '^FuzzHandler$$' -fuzztime $(FUZZTIME) ./webhook/
	go test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./webhook/

## soak: the replicas e2e test with 20 chains (each with a replica SIGKILLed)
SOAK_CHAINS ?= 20
soak:
	DEPSD_SOAK_CHAINS=$(SOAK_CHAINS) go test -count=1 -timeout 30m -run 'TestReplicas' -v ./e2e/
