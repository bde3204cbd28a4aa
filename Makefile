# Handoff Desk. `make run` and `make test` are the two commands; the rest serve them.
SHELL := /bin/bash
GO ?= go
TEST_FLAGS ?= -timeout 20m
GOLANGCI_LINT_VERSION := v2.15.0

.PHONY: run build test test-stress lint generate check-generated check-openapi bench-intake bench-desk bench-webhook bench-export bench-warm bench-conversation bench-dashboard bench-migrate bench-search bench-events soak db-stop clean screenshots

build:
	$(GO) build -o bin/web ./cmd/web

## run: build, find or start a local PostgreSQL, migrate (the deploy step), seed the demo, and serve on :8080. The demo desk
## lets webhooks go to private addresses (WEBHOOK_ALLOW_PRIVATE=1), where a bot under development
## listens; set WEBHOOK_ALLOW_PRIVATE=0 to try the refusal. A demo CRM page on a second loopback
## origin (DEMO_CRM, default 127.0.0.1:8081) frames the sidebar of a seeded package, as a CRM embeds
## it; FRAME_ANCESTORS names that origin. A demo customer chat (DEMO_CHAT, default 127.0.0.1:8082)
## lets you be the customer: its bot hands off on "refund" or "human" with the demo bot key, whose
## webhooks seed-demo points at the chat.
run: build
	@url="$${DATABASE_URL:-$$(scripts/localdb handoffdesk)}" && crm="$${DEMO_CRM:-127.0.0.1:8081}" && \
		chat="$${DEMO_CHAT:-127.0.0.1:8082}" && \
		DATABASE_URL="$$url" bin/web migrate && \
		DATABASE_URL="$$url" bin/web seed-demo -demo-chat "$$chat" && \
		addr="$${ADDR:-:8080}" && host="$${addr%:*}" && echo "Open http://$${host:-localhost}:$${addr##*:}" && \
		echo "The sidebar in a demo CRM: http://$$crm" && \
		echo "Be the customer in the demo chat: http://$$chat" && \
		DATABASE_URL="$$url" WEBHOOK_ALLOW_PRIVATE="$${WEBHOOK_ALLOW_PRIVATE:-1}" \
			FRAME_ANCESTORS="$${FRAME_ANCESTORS:-http://$$crm}" exec bin/web serve -demo-crm "$$crm" -demo-chat "$$chat"

## test: every test, against real PostgreSQL and headless Chromium; npm installs axe-core, which
## the accessibility test injects into the pages; scripts/promtool finds or unpacks the promtool
## that checks a real scrape; check-dashboard reads the Grafana dashboard's queries. internal/server,
## the longest package by far, is named first so that go test starts it first and runs the others
## beside it, not before it.
test: check-dashboard
	@scripts/chromium
	@npm install --no-audit --no-fund --loglevel=error
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		before="$$(scripts/testdbs list "$$url")" && \
		TEST_DATABASE_URL="$$url" PROMTOOL="$${PROMTOOL:-$$(scripts/promtool)}" $(GO) test $(TEST_FLAGS) ./internal/server ./... && \
		scripts/testdbs drop-new "$$url" "$$before"

## test-stress: make test while stress-ng (Debian's, installed when missing) keeps every CPU
## STRESS_LOAD percent busy (default 70), stopped with the run and after 45 minutes at most: the
## suite must hold on a busy machine, as CI's shared one is. -count=1: every run runs every test.
test-stress:
	@command -v stress-ng >/dev/null || { echo "test-stress: installing Debian's stress-ng" >&2; \
		apt-get install -y -qq stress-ng >/dev/null || { apt-get update -qq && apt-get install -y -qq stress-ng >/dev/null; }; }
	@stress-ng --cpu "$$(nproc)" --cpu-load "$${STRESS_LOAD:-70}" --timeout 45m --quiet & load=$$!; \
		trap 'kill $$load 2>/dev/null' EXIT; $(MAKE) --no-print-directory test TEST_FLAGS="$(TEST_FLAGS) -count=1 -timeout 30m"

## check-dashboard: docs/grafana-dashboard.json's queries parse with Prometheus's PromQL parser,
## read only series the registry has, and are charted in fitting units. tools/promqlcheck is a
## module of its own (see its go.mod); -mod=mod lets it take the desk's dependencies as they move.
.PHONY: check-dashboard
check-dashboard:
	cd tools/promqlcheck && $(GO) vet -mod=mod ./... && $(GO) test -mod=mod -count=1 ./...

## lint: golangci-lint with gosec and staticcheck (.golangci.yml), installed at the pinned version
## into GOPATH/bin when that version is missing; installed from a temporary directory, outside this
## module, with GOFLAGS=-mod=mod so that the module's own settings do not apply to it.
lint:
	@lint="$$($(GO) env GOPATH)/bin/golangci-lint" && \
		if [ "v$$("$$lint" version --short 2>/dev/null)" != "$(GOLANGCI_LINT_VERSION)" ]; then \
			echo "lint: installing golangci-lint $(GOLANGCI_LINT_VERSION)" >&2 && \
			(cd "$${TMPDIR:-/tmp}" && GOBIN="$$(dirname "$$lint")" GOFLAGS=-mod=mod \
				$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)); \
		fi && \
		"$$lint" run ./...

## generate: rebuild the committed templ code and CSS. `npm install` rather than `npm ci`: npm 11
## leaves other platforms' optional packages out of the lockfile (npm/cli#4828) and `npm ci` then
## refuses it; package.json pins exact versions and check-generated fails if the lockfile moves.
generate:
	$(GO) tool templ generate
	npm install --no-audit --no-fund --loglevel=error
	npm run --silent build:css

## check-generated: fail when the committed generated files differ from a fresh `make generate`.
check-generated: generate
	@git diff --exit-code -- '*_templ.go' static/css/app.css package-lock.json || \
		{ echo "generated files are stale: run 'make generate' and commit" >&2; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- '*_templ.go')" || \
		{ echo "new generated files are not committed" >&2; exit 1; }

## check-openapi: the bot API's OpenAPI document as other tools read it, from the file alone:
## Redocly's lint (redocly.yaml) and a Go client that oapi-codegen generates from it, built. The
## generator and the client's runtime come from tools/oapi.mod, so none of their dependencies enter
## go.mod; the client is generated into a directory that `./...` skips, removed afterwards.
check-openapi:
	@npm install --no-audit --no-fund --loglevel=error
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npx --no-install redocly lint internal/server/openapi.yaml
	@dir=tools/_oapiclient && trap 'rm -rf "$$dir"' EXIT && mkdir -p "$$dir" && \
		$(GO) tool -modfile=tools/oapi.mod oapi-codegen -config tools/oapi-codegen.yaml -o "$$dir/botapi.go" internal/server/openapi.yaml && \
		$(GO) build -modfile=tools/oapi.mod "./$$dir" && \
		echo "oapi-codegen: the generated client builds"

## bench-intake: HTTP intake of cold and warm packages (nobody online) vs raw INSERT on the same PostgreSQL, ~4 minutes (BENCH_FLAGS="-duration 2s -sizes 4096" to change).
bench-intake:
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		TEST_DATABASE_URL="$$url" $(GO) run ./cmd/benchintake $(BENCH_FLAGS)

## bench-desk: the live desk under load against same-run baselines (about 5 minutes; BENCH_FLAGS=-quick for a smoke run).
bench-desk:
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		TEST_DATABASE_URL="$$url" $(GO) run ./cmd/benchdesk $(BENCH_FLAGS)

## bench-webhook: webhook delivery against bots that answer at once, vs outbox INSERTs on the same PostgreSQL, ~1 minute.
bench-webhook:
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		TEST_DATABASE_URL="$$url" $(GO) run ./cmd/benchwebhook $(BENCH_FLAGS)

## bench-warm: the warm bridge across two instances (intake → ring, click → accepted webhook) vs cold packages, ~20 s.
bench-warm:
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		TEST_DATABASE_URL="$$url" $(GO) run ./cmd/benchwarm $(BENCH_FLAGS)

## bench-conversation: the conversation across two instances (a customer message POSTed to A → the frame carrying it on the agent's socket on B, vs bare NOTIFY→LISTEN) and messages/s at 8 and 64 relays vs raw INSERT of the same rows, ~2 minutes.
bench-conversation:
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		TEST_DATABASE_URL="$$url" $(GO) run ./cmd/benchconversation $(BENCH_FLAGS)

## bench-export: the eval export of 10,000 and 100,000 records vs a bare scan of the same rows, ~1 minute.
bench-export:
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		TEST_DATABASE_URL="$$url" $(GO) test ./internal/evals -run '^$$' -bench Export -benchtime 3x

## bench-migrate: a database at the previous release's schema (migration 00023) with 1,000,000 packages
## (seeding takes a few minutes; BENCH_PACKAGES=50000 for a quick run), upgraded by bin/web migrate
## while bots post, agents claim and people sign in; reports the longest write stall and the upgrade's time.
bench-migrate: build
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		TEST_DATABASE_URL="$$url" $(GO) run ./cmd/benchmigrate -web bin/web -packages $${BENCH_PACKAGES:-1000000} $(BENCH_FLAGS)

## soak: the fault runs (kill -9 of PostgreSQL and of an instance under load, a slow webhook receiver, pool exhaustion, and 5: warm
## transfers and refund approvals on three instances while one instance and then PostgreSQL are killed) on a private loopback
## cluster, about 4–6 minutes (SOAK_FLAGS=-quick: about 2½; SOAK_FLAGS="-scenarios 5": the warm run alone, about 2). make test
## runs the fifth at its -quick size (TestWarmTransfersAndApprovalsHoldUnderKills).
soak: build
	$(GO) run ./cmd/soak -web bin/web $(SOAK_FLAGS)

## db-stop: stop the private PostgreSQL that `make run` may have started under .data/.
db-stop:
	@if [ -f .data/postgres/postmaster.pid ]; then \
		if [ "$$(id -u)" -eq 0 ]; then runuser -u postgres -- pg_ctl -D .data/postgres stop; else pg_ctl -D .data/postgres stop; fi; fi

clean:
	rm -rf bin

## screenshots: remake docs/screenshot.png, docs/dashboard.png, docs/package.png and the pictures of
## an agent's day (docs/day-*.png, taken at the steps of the walk TestBrowserAgentsDay walks) and of
## a conversation after the handoff (docs/conversation*.png, played through the demo chat) from a
## demo desk of their own (seeded as make run seeds, served on loopback with its demo CRM and chat,
## photographed in Chromium).
screenshots: build
	@scripts/chromium
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && $(GO) run ./cmd/screenshots -web bin/web -out docs -db "$$url"

## bench-dashboard: seeds 1,000,000 packages with their events and replies (a few minutes), then
## times each dashboard query per window for all queues and the busiest, beside a count(*) of the
## same rows (BENCH_PACKAGES=50000 for a quick run).
bench-dashboard:
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		TEST_DATABASE_URL="$$url" $(GO) test ./internal/dashboard -run '^$$' -bench Dashboard -benchtime 1x -timeout 60m -v

## bench-events: grows the event log to 10,000, 100,000 and 1,000,000 events (seeded in SQL, under a minute;
## BENCH_EVENTS=100000 for a quick run) and shows the live hub's idle read at each size: EXPLAIN (ANALYZE, BUFFERS)
## of its custom and generic plans beside the statement it replaced, and the PostgreSQL CPU per read, which is
## the share of a core an idle instance spends on it (one read a second), with the machine's load average.
bench-events:
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		TEST_DATABASE_URL="$$url" $(GO) test ./internal/events -run '^$$' -bench EventLog -benchtime 1x -timeout 10m -v

## bench-search: seeds 1,000,000 packages (several minutes; BENCH_PACKAGES=100000 for a quick run), then
## times /packages' first page for the searches people type and the counts a dashboard figure's link
## makes, as a supervisor and as an agent, beside a plain index lookup and a count(*) of a queue in the
## same run, with the machine's load average.
bench-search:
	@url="$${TEST_DATABASE_URL:-$$(scripts/localdb postgres)}" && \
		TEST_DATABASE_URL="$$url" $(GO) test ./internal/search -run '^$$' -bench Search -benchtime 1x -timeout 90m -v
