# The whole suite runs on the embedded SQLite backend (with the race detector), then again on
# PostgreSQL when TEST_DATABASE_URL names a database the tests may create databases from.
.PHONY: test test-sqlite test-postgres build bench

test: test-sqlite test-postgres

test-sqlite:
	env -u TEST_DATABASE_URL go test -race -count=1 ./...

test-postgres:
	@if [ -n "$$TEST_DATABASE_URL" ]; then \
		echo "== PostgreSQL: $$TEST_DATABASE_URL"; \
		go test -count=1 ./...; \
	else \
		echo "TEST_DATABASE_URL is not set: skipping the PostgreSQL pass"; \
	fi

build:
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/gale ./cmd/gale

# The backend follows TEST_DATABASE_URL, as for the tests; scripts/loadtest.sh measures a real
# gale process with wrk instead.
bench:
	go test -run '^$$' -bench ListOrganizations -benchtime 4000x -count 3 ./internal/bench/
	go test -run '^$$' -bench PasswordVerify -benchtime 20x ./internal/bench/
