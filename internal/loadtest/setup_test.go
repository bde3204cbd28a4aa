package loadtest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

func TestCleanupUndoesInReverseAndCarriesOn(t *testing.T) {
	var c Cleanup
	var order []string
	first, third := errors.New("first failed"), errors.New("third failed")
	c.Add(func() error { order = append(order, "first"); return first })
	c.Add(func() error { order = append(order, "second"); return nil })
	c.Add(func() error { order = append(order, "third"); return third })
	err := c.Run()
	if want := []string{"third", "second", "first"}; !slices.Equal(order, want) {
		t.Errorf("undid %q, want %q", order, want)
	}
	if !errors.Is(err, first) || !errors.Is(err, third) {
		t.Errorf("Run = %v, want both failures", err)
	}
	var empty Cleanup
	if err := empty.Run(); err != nil {
		t.Errorf("an empty Cleanup returned %v", err)
	}
}

func TestPoolURL(t *testing.T) {
	u, err := PoolURL("postgres://bench:secret@127.0.0.1:5432/bench_x?sslmode=disable", 32)
	if err != nil {
		t.Fatal(err)
	}
	if want := "postgres://bench:secret@127.0.0.1:5432/bench_x?pool_max_conns=32&sslmode=disable"; u.String() != want {
		t.Errorf("PoolURL = %s, want %s", u, want)
	}
	u, err = PoolURL("postgres://127.0.0.1/bench_x?pool_max_conns=4", 16)
	if err != nil || u.Query().Get("pool_max_conns") != "16" || len(u.Query()["pool_max_conns"]) != 1 {
		t.Errorf("PoolURL over an existing pool_max_conns = %v, %v; want it replaced by 16", u, err)
	}
	if _, err := PoolURL("postgres://%zz", 1); err == nil {
		t.Error("PoolURL of an unparsable URL did not fail")
	}
}

func TestDescribe(t *testing.T) {
	got := describe("PostgreSQL 18.1", []string{"synchronous_commit", "fsync"}, []string{"off", "on"})
	if want := "PostgreSQL 18.1; synchronous_commit=off, fsync=on"; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
	if got := describe("PostgreSQL 18.1", nil, nil); got != "PostgreSQL 18.1" {
		t.Errorf("describe without settings = %q", got)
	}
}

func TestDescribeServer(t *testing.T) {
	description, values, err := DescribeServer(t.Context(), pgtest.AdminURL(), "fsync", "max_connections")
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != 2 || (values[0] != "on" && values[0] != "off") || values[1] == "" {
		t.Errorf("fsync, max_connections = %q", values)
	}
	if !strings.HasPrefix(description, "PostgreSQL ") || !strings.HasSuffix(description, "; fsync="+values[0]+", max_connections="+values[1]) {
		t.Errorf("description = %q", description)
	}
}

func TestServeRunsUntilStopped(t *testing.T) {
	ln, baseURL, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(baseURL, "http://127.0.0.1:") || baseURL != "http://"+ln.Addr().String() {
		t.Fatalf("Listen's URL is %s for %s", baseURL, ln.Addr())
	}
	stopped := errors.New("stopped as asked")
	ctx, interrupt := context.WithCancel(t.Context())
	stop := Serve(ctx, func(ctx context.Context) error {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
			ReadHeaderTimeout: 5 * time.Second}
		go func() {
			<-ctx.Done()
			srv.Close()
		}()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return stopped
	})
	interrupt() // the run's interrupt must not stop the server: teardown does
	resp, err := http.Get(baseURL)
	if err != nil {
		t.Fatalf("the server stopped with the run's context: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Errorf("the server answered %q", body)
	}
	if err := stop(); !errors.Is(err, stopped) {
		t.Errorf("stop = %v, want what serve returned", err)
	}
	if _, err := http.Get(baseURL); err == nil {
		t.Error("the server still answers after stop")
	}
}

// A scratch database lives until the run's cleanup, which drops it.
func TestScratchDatabaseIsDroppedByTheCleanup(t *testing.T) {
	adminURL := pgtest.AdminURL()
	var c Cleanup
	name, dbURL, err := c.ScratchDatabase(t.Context(), adminURL, "loadtest_")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, "loadtest_") || !strings.Contains(dbURL, "/"+name) {
		t.Errorf("created %s at %s", name, Redacted(dbURL))
	}
	if exists, err := DatabaseExists(t.Context(), adminURL, name); err != nil || !exists {
		t.Fatalf("before the cleanup, DatabaseExists(%s) = %v, %v", name, exists, err)
	}
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if exists, err := DatabaseExists(t.Context(), adminURL, name); err != nil || exists {
		t.Errorf("after the cleanup, DatabaseExists(%s) = %v, %v", name, exists, err)
	}
}

func TestDescribeDurability(t *testing.T) {
	description, err := DescribeDurability(t.Context(), pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(description, "PostgreSQL ") || !strings.Contains(description, "; synchronous_commit=") ||
		!strings.HasSuffix(description, " (as configured: commits are durable only if both are on)") {
		t.Errorf("description = %q", description)
	}
}
