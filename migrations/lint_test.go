package migrations

import (
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// firstLinted is the first migration written after production ran 00023 (the release before the
// upgrade rules): migrations before it are history, already applied wherever the desk runs.
const firstLinted = 24

// Every migration from firstLinted on keeps the desk writable while it runs (docs/operations.md):
// the rules below are the ones a reader of the SQL can check.
func TestMigrationsKeepTheDeskWritable(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	linted := 0
	for _, name := range files {
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			t.Fatalf("%s: no version before the first underscore", name)
		}
		if version < firstLinted {
			continue
		}
		src, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range lint(string(src)) {
			t.Errorf("%s: %s", name, problem)
		}
		linted++
	}
	if linted == 0 {
		t.Fatalf("no migration from %05d on: the lint read nothing", firstLinted)
	}
}

// Each rule catches the mistake it is for, and lets the right way through.
func TestLintRules(t *testing.T) {
	t.Parallel()
	const noTx = "-- +goose NO TRANSACTION\n-- +goose Up\n"
	const tx = "-- +goose Up\n"
	for _, c := range []struct {
		name, sql, want string // want "" : no problem
	}{
		{"plain index on an existing table", tx + "CREATE INDEX handoffs_x_idx ON handoffs (x);", "CREATE INDEX on existing table handoffs without CONCURRENTLY"},
		{"plain index on a table of the same file", tx + "CREATE TABLE notes (id bigint);\nCREATE INDEX notes_id_idx ON notes (id);", ""},
		{"concurrent build in a transaction", tx + "DROP INDEX CONCURRENTLY IF EXISTS h_idx;\nCREATE INDEX CONCURRENTLY h_idx ON handoffs (x);", "CONCURRENTLY in a migration that runs in a transaction"},
		{"concurrent build without dropping an invalid one first", noTx + "CREATE INDEX CONCURRENTLY h_idx ON handoffs (x);", "not preceded by DROP INDEX CONCURRENTLY IF EXISTS h_idx"},
		{"concurrent build keeping an invalid one", noTx + "DROP INDEX CONCURRENTLY IF EXISTS h_idx;\nCREATE INDEX CONCURRENTLY IF NOT EXISTS h_idx ON handoffs (x);", "IF NOT EXISTS would keep an invalid index"},
		{"concurrent build done right", noTx + "DROP INDEX CONCURRENTLY IF EXISTS h_idx;\nCREATE UNIQUE INDEX CONCURRENTLY h_idx ON handoffs (x);", ""},
		{"drop that cannot run again", noTx + "DROP INDEX CONCURRENTLY h_idx;", "DROP without IF EXISTS"},
		{"table that cannot be created again", noTx + "CREATE TABLE t (id bigint);", "CREATE TABLE without IF NOT EXISTS"},
		{"SET LOCAL outside a transaction", noTx + "SET LOCAL lock_timeout = '1s';", "SET LOCAL outside a transaction"},
		{"session setting left behind", noTx + "SET statement_timeout = 0;", "SET statement_timeout is not RESET"},
		{"lock_timeout too long", tx + "SET LOCAL lock_timeout = '5s';", "lock_timeout '5s' above 1s"},
		{"lock_timeout off", tx + "SET LOCAL lock_timeout = 0;", "lock_timeout 0 above 1s"},
		{"unbatched backfill", tx + "UPDATE handoffs SET x = 1;", "UPDATE of handoffs outside a batched loop"},
		{"unbatched delete", tx + "DELETE FROM events WHERE kind = 'x';", "DELETE of events outside a batched loop"},
		{"backfill of a small table", tx + "UPDATE users SET email = lower(email);", ""},
		{"a trigger on updates", tx + "CREATE TRIGGER keep AFTER UPDATE OF x ON handoffs FOR EACH ROW EXECUTE FUNCTION keep();", ""},
		{"a trigger's function", tx + "-- +goose StatementBegin\nCREATE FUNCTION keep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE handoffs SET x = 1 WHERE id = NEW.id; RETURN NULL; END $$;\n-- +goose StatementEnd", ""},
		{"batched backfill", noTx + "-- +goose StatementBegin\nDO $$\nBEGIN\n  LOOP\n    UPDATE handoffs SET x = 1 WHERE id IN (SELECT id FROM handoffs WHERE x IS NULL LIMIT 5000);\n    EXIT WHEN NOT FOUND;\n    COMMIT;\n  END LOOP;\nEND $$;\n-- +goose StatementEnd", ""},
		{"batched backfill in a transaction", tx + "-- +goose StatementBegin\nDO $$\nBEGIN\n  LOOP\n    UPDATE handoffs SET x = 1 WHERE id IN (SELECT id FROM handoffs WHERE x IS NULL LIMIT 5000);\n    EXIT WHEN NOT FOUND;\n    COMMIT;\n  END LOOP;\nEND $$;\n-- +goose StatementEnd", "UPDATE of handoffs outside a batched loop"},
		{"validated check", tx + "ALTER TABLE handoffs ADD CONSTRAINT c CHECK (x > 0);", "ADD CONSTRAINT on handoffs without NOT VALID"},
		{"check validated later", tx + "ALTER TABLE handoffs ADD CONSTRAINT c CHECK (x > 0) NOT VALID;", ""},
		{"column type change", tx + "ALTER TABLE handoffs ALTER COLUMN x TYPE bigint;", "ALTER TABLE handoffs rewrites or scans it under an exclusive lock"},
		{"not null", tx + "ALTER TABLE handoffs ALTER COLUMN x SET NOT NULL;", "ALTER TABLE handoffs rewrites or scans it under an exclusive lock"},
		{"new nullable column", tx + "ALTER TABLE handoffs ADD COLUMN x text;", ""},
		{"table lock", tx + "LOCK TABLE handoffs IN EXCLUSIVE MODE;", "LOCK TABLE"},
		{"plain reindex", tx + "REINDEX INDEX h_idx;", "REINDEX without CONCURRENTLY"},
	} {
		problems := lint(c.sql)
		switch {
		case c.want == "" && len(problems) > 0:
			t.Errorf("%s: %q, want no problem", c.name, problems)
		case c.want != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }):
			t.Errorf("%s: %q, want one saying %q", c.name, problems, c.want)
		}
	}
}

// smallTables hold rows per person, per queue or per bot, never per package, nor per event: a
// statement that rewrites one, or holds it for a scan, ends within the lock_timeout's second.
var smallTables = []string{
	"users", "queues", "queue_members", "api_keys", "api_key_queues", "sso_settings", "sso_identities",
	"presence",       // one row per signed-in person and instance
	"login_failures", // pruned to the login window as it is read
}

var (
	createIndexRe = regexp.MustCompile(`^CREATE (?:UNIQUE )?INDEX (CONCURRENTLY )?(IF NOT EXISTS )?(\S+) ON (?:ONLY )?(\S+)`)
	createTableRe = regexp.MustCompile(`^CREATE TABLE (IF NOT EXISTS )?(\S+)`)
	dropIndexRe   = regexp.MustCompile(`^DROP INDEX CONCURRENTLY IF EXISTS (\S+)$`)
	dropRe        = regexp.MustCompile(`^DROP (?:TABLE|INDEX|VIEW|FUNCTION|TRIGGER|TYPE|SEQUENCE)\b`)
	setRe         = regexp.MustCompile(`^SET (LOCAL )?(\w+)\s*(?:=|TO)\s*(.+)$`)
	resetRe       = regexp.MustCompile(`^RESET (\w+)$`)
	definesRe     = regexp.MustCompile(`^CREATE (OR REPLACE )?(FUNCTION|PROCEDURE) `)
	writeRe       = regexp.MustCompile(`(\bON |\bFOR |\bKEY |\bOR |\bAFTER |\bBEFORE )?\b(UPDATE|DELETE FROM) (?:ONLY )?([A-Z_][A-Z0-9_.]*)`)
	alterTableRe  = regexp.MustCompile(`^ALTER TABLE (?:IF EXISTS )?(?:ONLY )?(\S+) (.*)$`)
	rewritesRe    = regexp.MustCompile(`\bALTER COLUMN \S+ (?:SET DATA )?TYPE\b|\bSET NOT NULL\b|\bADD (?:CONSTRAINT \S+ )?(?:PRIMARY KEY|UNIQUE) \(|\bSET (?:UN)?LOGGED\b|\bSET TABLESPACE\b`)
	addCheckRe    = regexp.MustCompile(`\bADD CONSTRAINT \S+ (?:CHECK|FOREIGN KEY)\b|\bADD COLUMN .*\bREFERENCES\b`)
	durationRe    = regexp.MustCompile(`^'?(\d+)\s*(ms|s|min)?'?$`)
)

// lint returns what in a goose SQL migration would hold writes for longer than a second, or would
// not run again after failing half-way outside a transaction.
func lint(src string) []string {
	noTx := strings.Contains(src, "-- +goose NO TRANSACTION")
	var problems []string
	for _, sec := range sections(src) {
		created := map[string]bool{}
		dropped := map[string]bool{}
		set := map[string]bool{}
		for _, stmt := range sec.statements {
			upper := strings.ToUpper(stmt)
			report := func(format string, args ...any) {
				problems = append(problems, fmt.Sprintf("%s: ", sec.direction)+fmt.Sprintf(format, args...))
			}
			existing := func(table string) bool { return !created[table] }
			traffic := func(table string) bool { return existing(table) && !slices.Contains(smallTables, table) }

			if strings.Contains(upper, "CONCURRENTLY") && !noTx {
				report("CONCURRENTLY in a migration that runs in a transaction (add -- +goose NO TRANSACTION, in a file of its own): %s", stmt)
			}
			if m := createTableRe.FindStringSubmatch(upper); m != nil {
				created[strings.ToLower(m[2])] = true
				if noTx && m[1] == "" {
					report("CREATE TABLE without IF NOT EXISTS cannot run again after a failure half-way: %s", stmt)
				}
			}
			if m := createIndexRe.FindStringSubmatch(upper); m != nil {
				name, table := strings.ToLower(m[3]), strings.ToLower(m[4])
				switch {
				case m[1] == "" && existing(table):
					report("CREATE INDEX on existing table %s without CONCURRENTLY blocks its writes for the whole build: %s", table, stmt)
				case m[1] != "" && m[2] != "":
					report("CREATE INDEX CONCURRENTLY IF NOT EXISTS would keep an invalid index a failed build left: drop it first instead: %s", stmt)
				case m[1] != "" && !dropped[name]:
					report("CREATE INDEX CONCURRENTLY %s not preceded by DROP INDEX CONCURRENTLY IF EXISTS %s (a failed build leaves it invalid)", name, name)
				}
			}
			if m := dropIndexRe.FindStringSubmatch(upper); m != nil {
				dropped[strings.ToLower(m[1])] = true
			}
			if noTx && dropRe.MatchString(upper) && !strings.Contains(upper, " IF EXISTS ") {
				report("DROP without IF EXISTS cannot run again after a failure half-way: %s", stmt)
			}
			if m := setRe.FindStringSubmatch(upper); m != nil {
				local, name, value := m[1] != "", strings.ToLower(m[2]), m[3]
				if local && noTx {
					report("SET LOCAL outside a transaction does nothing: %s", stmt)
				}
				if !local {
					set[name] = true
				}
				if name == "lock_timeout" && !withinASecond(value) {
					report("lock_timeout %s above 1s: %s", strings.ToLower(value), stmt)
				}
			}
			if m := resetRe.FindStringSubmatch(upper); m != nil {
				delete(set, strings.ToLower(m[1]))
			}
			batched := noTx && strings.HasPrefix(upper, "DO ") && strings.Contains(upper, "LIMIT ") && strings.Contains(upper, "COMMIT")
			// A function's body writes when it is called (a trigger's, one row at a time), not
			// while the migration runs.
			defines := definesRe.MatchString(upper)
			for _, m := range writeRe.FindAllStringSubmatch(upper, -1) {
				// ON UPDATE CASCADE, FOR UPDATE, FOR NO KEY UPDATE and a trigger's INSERT OR UPDATE ON
				// or AFTER UPDATE OF write nothing themselves.
				if table := strings.ToLower(m[3]); m[1] == "" && table != "on" && traffic(table) && !batched && !defines {
					report("%s of %s outside a batched loop (a DO block with LIMIT and COMMIT, in a NO TRANSACTION migration) holds its rows for the whole table: %s",
						strings.Fields(m[2])[0], table, stmt)
				}
			}
			if m := alterTableRe.FindStringSubmatch(upper); m != nil {
				table := strings.ToLower(m[1])
				if traffic(table) && rewritesRe.MatchString(m[2]) {
					report("ALTER TABLE %s rewrites or scans it under an exclusive lock: %s", table, stmt)
				}
				if traffic(table) && addCheckRe.MatchString(m[2]) && !strings.Contains(m[2], "NOT VALID") {
					report("ADD CONSTRAINT on %s without NOT VALID scans it under an exclusive lock (VALIDATE CONSTRAINT after, in a statement of its own): %s", table, stmt)
				}
			}
			if strings.HasPrefix(upper, "LOCK ") {
				report("LOCK TABLE holds writes for the rest of the migration: %s", stmt)
			}
			if strings.HasPrefix(upper, "REINDEX ") && !strings.Contains(upper, "CONCURRENTLY") {
				report("REINDEX without CONCURRENTLY blocks writes for the whole build: %s", stmt)
			}
			if strings.HasPrefix(upper, "VACUUM FULL") || strings.HasPrefix(upper, "CLUSTER") {
				report("VACUUM FULL and CLUSTER rewrite the table under an exclusive lock: %s", stmt)
			}
		}
		if noTx {
			for name := range set {
				problems = append(problems, fmt.Sprintf("%s: SET %s is not RESET: outside a transaction it stays on the runner's session for the migrations after", sec.direction, name))
			}
		}
	}
	return problems
}

// withinASecond reads a SET lock_timeout value: above zero (zero waits for ever) and at most 1s.
func withinASecond(value string) bool {
	m := durationRe.FindStringSubmatch(strings.ToLower(value))
	if m == nil {
		return false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n == 0 {
		return false
	}
	unit := map[string]time.Duration{"": time.Millisecond, "ms": time.Millisecond, "s": time.Second, "min": time.Minute}[m[2]]
	return time.Duration(n)*unit <= time.Second
}

type section struct {
	direction  string // "up" or "down"
	statements []string
}

// sections splits a goose SQL file as goose does: statements end with a semicolon at the end of a
// line, or are the whole of a StatementBegin … StatementEnd block; comments are left out, and each
// statement's whitespace is folded to single spaces.
func sections(src string) []section {
	var out []section
	var cur *section
	var stmt strings.Builder
	block := false
	flush := func() {
		if s := strings.Join(strings.Fields(stmt.String()), " "); s != "" && cur != nil {
			cur.statements = append(cur.statements, strings.TrimSuffix(s, ";"))
		}
		stmt.Reset()
	}
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "-- +goose Up"), strings.HasPrefix(trimmed, "-- +goose Down"):
			flush()
			out = append(out, section{direction: strings.ToLower(strings.Fields(trimmed)[2])})
			cur = &out[len(out)-1]
			continue
		case strings.HasPrefix(trimmed, "-- +goose StatementBegin"):
			flush()
			block = true
			continue
		case strings.HasPrefix(trimmed, "-- +goose StatementEnd"):
			block = false
			flush()
			continue
		case strings.HasPrefix(trimmed, "--"):
			continue
		}
		if i := strings.Index(line, " --"); i >= 0 && !block {
			line = line[:i]
		}
		stmt.WriteString(line + "\n")
		if !block && strings.HasSuffix(strings.TrimSpace(line), ";") {
			flush()
		}
	}
	flush()
	return out
}
