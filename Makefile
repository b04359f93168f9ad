# The whole suite runs on the embedded SQLite backend (with the race detector), then again on
# PostgreSQL when TEST_DATABASE_URL names a database the tests may create databases from. The
# PostgreSQL pass runs only the packages whose tests reach a database (through storetest): the
# others (the agent's, the wire formats) would repeat the first pass unchanged.
.PHONY: test test-sqlite test-postgres build bench agents servers dist

DB_PACKAGES = $(shell go list -test -f '{{.ImportPath}}|{{join .Deps " "}}' ./... | \
	awk -F'|' '$$1 ~ / \[/ && $$2 ~ /gale\/internal\/platform\/store\/storetest/ { split($$1, a, " "); sub(/_test$$/, "", a[1]); print a[1] }' | sort -u)

test: test-sqlite test-postgres

test-sqlite:
	env -u TEST_DATABASE_URL go test -race -count=1 ./...

test-postgres:
	@if [ -n "$$TEST_DATABASE_URL" ]; then \
		echo "== PostgreSQL: $$TEST_DATABASE_URL"; \
		go test -count=1 $(DB_PACKAGES); \
	else \
		echo "TEST_DATABASE_URL is not set: skipping the PostgreSQL pass"; \
	fi

build:
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/gale ./cmd/gale
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/gale-agent ./cmd/gale-agent

# The backend follows TEST_DATABASE_URL, as for the tests; scripts/loadtest.sh measures a real
# gale process with wrk instead.
bench:
	go test -run '^$$' -bench ListOrganizations -benchtime 4000x -count 3 ./test/bench/
	go test -run '^$$' -bench ListDevices -benchtime 4000x -count 2 ./test/bench/
	go test -run '^$$' -bench RequestFloor -benchtime 20000x -count 2 ./test/bench/
	go test -run '^$$' -bench PasswordVerify -benchtime 20x ./test/bench/
	go test -run '^$$' -bench PartnerExport -benchtime 3x ./test/bench/
	go test -run '^$$' -bench Deliveries -benchtime 2000x ./internal/domains/webhooks/
	go test -run '^$$' -bench AlertSweep -benchtime 3x ./test/bench/

# Release builds. VERSION is what git describe makes of the latest v* tag (without its v,
# e.g. 1.2.3 or 1.2.3-4-gabc1234-dirty), else 0.0.0-dev.<commit>: always a version the
# server accepts. PLATFORMS are the os/arch pairs to build (every supported one by default),
# DIST the output directory.
GIT_TAG_VERSION = $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null | sed 's/^v//')
GIT_COMMIT = $(shell git rev-parse --short HEAD 2>/dev/null)
VERSION ?= $(or $(GIT_TAG_VERSION),0.0.0-dev$(if $(GIT_COMMIT),.$(GIT_COMMIT)))
AGENT_PLATFORMS := linux/amd64 linux/arm64 windows/amd64 windows/arm64 darwin/amd64 darwin/arm64
PLATFORMS ?= $(AGENT_PLATFORMS)
DIST ?= dist
# Static, stripped, without local paths; the version is the one gale version and
# gale-agent version print.
GO_RELEASE_BUILD = CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)"
NFPM = go run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
# Package versions sort as their releases do: a pre-release before its release (1.2.3~rc.1,
# as dpkg and rpm read a "~"); the other hyphens of a git describe version become dots.
PKG_VERSION = $(shell echo '$(VERSION)' | sed 's/-/~/; s/-/./g')
PKG_DATE = $(or $(shell git log -1 --format=%cI 2>/dev/null),$(shell date -u +%Y-%m-%dT%H:%M:%SZ))
# The packages' changelog (Debian changelog, RPM %changelog): one entry for this version,
# which nfpm reads from standard input (changelog: /dev/stdin in packaging/*.yaml).
PKG_CHANGELOG = printf -- '- semver: %s-1\n  date: %s\n  packager: %s\n  deb:\n    urgency: medium\n    distributions: [stable]\n  changes:\n    - note: Gale %s.\n' \
	'$(PKG_VERSION)' '$(PKG_DATE)' 'Gale maintainers <maintainers@gale.invalid>' '$(VERSION)'

# Agent binaries for every platform of PLATFORMS, named as gale agent-release register-dir
# expects: $(DIST)/agents/gale-agent-<os>-<arch>[.exe].
agents:
	@mkdir -p $(DIST)/agents
	@for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
		echo "gale-agent $(VERSION) $$os/$$arch"; \
		GOOS=$$os GOARCH=$$arch $(GO_RELEASE_BUILD) -o $(DIST)/agents/gale-agent-$$os-$$arch$$ext ./cmd/gale-agent || exit 1; \
	done

# The server for every Linux platform of PLATFORMS: $(DIST)/gale-linux-<arch>.
servers:
	@mkdir -p $(DIST)
	@for p in $(filter linux/%,$(PLATFORMS)); do \
		arch=$${p#linux/}; \
		echo "gale $(VERSION) linux/$$arch"; \
		GOOS=linux GOARCH=$$arch $(GO_RELEASE_BUILD) -o $(DIST)/gale-linux-$$arch ./cmd/gale || exit 1; \
	done

# Release artifacts in $(DIST): the agents and the servers (above), .deb and .rpm packages
# of both for every Linux platform (the server's carries every agent build, see packaging/),
# and SHA256SUMS of them all. make dist PLATFORMS=linux/amd64 builds one platform only.
dist:
	@[ -n "$(strip $(DIST))" ] || { echo "DIST must name a directory" >&2; exit 1; }
	@rm -rf $(DIST)/agents $(DIST)/packages $(DIST)/SHA256SUMS $(DIST)/gale-linux-*
	@$(MAKE) --no-print-directory agents servers
	@mkdir -p $(DIST)/packages
	@for p in $(filter linux/%,$(PLATFORMS)); do \
		arch=$${p#linux/}; \
		for pkg in gale gale-agent; do for format in deb rpm; do \
			$(PKG_CHANGELOG) | VERSION=$(VERSION) PKG_VERSION=$(PKG_VERSION) ARCH=$$arch DIST=$(DIST) \
				$(NFPM) package --config packaging/$$pkg.yaml --packager $$format --target $(DIST)/packages/ || exit 1; \
		done; done; \
	done
	@cd $(DIST) && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS
