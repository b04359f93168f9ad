# The whole suite runs on the embedded SQLite backend (with the race detector), then again on
# PostgreSQL when TEST_DATABASE_URL names a database the tests may create databases from. The
# PostgreSQL pass runs only the packages whose tests reach a database (through storetest): the
# others (the agent's, the wire formats) would repeat the first pass unchanged.
.PHONY: test test-sqlite test-postgres build bench agents

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

# Agent binaries for every supported platform, named as gale agent-release register-dir expects.
# VERSION is what git describe makes of the latest v* tag (without its v, e.g. 1.2.3 or
# 1.2.3-4-gabc1234-dirty), else 0.0.0-dev.<commit>: always a version the server accepts.
GIT_TAG_VERSION = $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null | sed 's/^v//')
GIT_COMMIT = $(shell git rev-parse --short HEAD 2>/dev/null)
VERSION ?= $(or $(GIT_TAG_VERSION),0.0.0-dev$(if $(GIT_COMMIT),.$(GIT_COMMIT)))
AGENT_PLATFORMS := linux/amd64 linux/arm64 windows/amd64 windows/arm64 darwin/amd64 darwin/arm64

agents:
	@mkdir -p dist/agents
	@for p in $(AGENT_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
		echo "gale-agent $(VERSION) $$os/$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" \
			-o dist/agents/gale-agent-$$os-$$arch$$ext ./cmd/gale-agent || exit 1; \
	done
