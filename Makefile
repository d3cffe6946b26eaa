# The one place that says how depsd is built and tested; .ci/run calls it.
# podman-executor is its own Go module (its podman dependencies cannot share
# a build list with BuildKit's); it builds without cgo and with these tags.
EXECUTOR_TAGS := remote exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_openpgp

.PHONY: test test-depsd test-executor vet build demo bench fuzz mutants soak

## test: vet and test both modules (the README's test command)
test: vet test-depsd test-executor

vet:
	gofmt -l . | (! grep .) || (echo "gofmt needed on the files above" && false)
	go vet ./...
	cd podman-executor && CGO_ENABLED=0 go vet -tags "$(EXECUTOR_TAGS)" ./...

test-depsd:
	go test -race -count=1 ./...

test-executor:
	cd podman-executor && CGO_ENABLED=0 go test -count=1 -tags "$(EXECUTOR_TAGS)" ./...

build:
	go build -o bin/depsd ./cmd/depsd
	cd podman-executor && CGO_ENABLED=0 go build -tags "$(EXECUTOR_TAGS)" -o ../bin/podman-executor ./cmd/podman-executor

## bench: the benchmarks whose figures the README quotes (the whole-system
## ones in bench/ at depsd's default settings; about 4 minutes)
bench:
	go test -run '^$$' -bench . -benchmem ./deps/
	go test -run '^$$' -bench . -benchtime 1x -timeout 30m ./bench/

## mutants: break the code in known ways and check the tests fail (a few minutes)
mutants:
	scripts/mutants.sh

## fuzz: run each fuzz target of the parsers for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	for f in FuzzAnalyzeContainerfile FuzzParseGitLabDeps FuzzRegistryMap; do \
		go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./deps/ || exit 1; done
	go test -run '^$$' -fuzz '^FuzzHandler$$' -fuzztime $(FUZZTIME) ./webhook/

## soak: the replicas e2e test with 20 chains (each with a replica SIGKILLed)
SOAK_CHAINS ?= 20
soak:
	DEPSD_SOAK_CHAINS=$(SOAK_CHAINS) go test -count=1 -timeout 30m -run 'TestReplicas' -v ./e2e/
