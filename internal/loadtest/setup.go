package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Cleanup undoes a set-up as far as it got: each step that succeeds adds its undo, so that a
// set-up that fails half-way, or a run that is interrupted, still drops its database and stops
// its servers.
type Cleanup struct {
	undo []func() error
}

// Add records the undo of a step that has just succeeded.
func (c *Cleanup) Add(undo func() error) {
	c.undo = append(c.undo, undo)
}

// Run undoes every step, the last one first since later steps depend on earlier ones, carries on
// past failures, and returns all their errors.
func (c *Cleanup) Run() error {
	var errs []error
	for _, undo := range slices.Backward(c.undo) {
		errs = append(errs, undo())
	}
	return errors.Join(errs...)
}

// ScratchDatabase creates the database of one run, named prefix plus a random suffix, on the
// server of adminURL, and adds its drop to c.
func (c *Cleanup) ScratchDatabase(ctx context.Context, adminURL, prefix string) (name, dbURL string, err error) {
	if name, dbURL, err = CreateDatabase(ctx, adminURL, prefix); err != nil {
		return "", "", err
	}
	c.Add(func() error { return DropDatabase(adminURL, name) })
	return name, dbURL, nil
}

// DescribeDurability is DescribeServer's description of the two settings that make a commit
// durable, for a report whose figures are commits.
func DescribeDurability(ctx context.Context, adminURL string) (string, error) {
	description, _, err := DescribeServer(ctx, adminURL, "synchronous_commit", "fsync")
	if err != nil {
		return "", err
	}
	return description + " (as configured: commits are durable only if both are on)", nil
}

// DescribeServer reads the version of the PostgreSQL at adminURL and the current value of each
// named setting, since what the figures mean depends on them (a commit is durable only with
// synchronous_commit and fsync on). It returns them as "version; name=value, ..." and the values
// in the order named.
func DescribeServer(ctx context.Context, adminURL string, settings ...string) (description string, values []string, err error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }() // a close error cannot change the answer
	query := "SELECT version()"
	args := make([]any, len(settings))
	var version string
	values = make([]string, len(settings))
	dest := []any{&version}
	for i, name := range settings {
		query += fmt.Sprintf(", current_setting($%d)", i+1)
		args[i] = name
		dest = append(dest, &values[i])
	}
	if err := conn.QueryRow(ctx, query, args...).Scan(dest...); err != nil {
		return "", nil, err
	}
	return describe(version, settings, values), values, nil
}

func describe(version string, settings, values []string) string {
	if len(settings) == 0 {
		return version
	}
	pairs := make([]string, len(settings))
	for i, name := range settings {
		pairs[i] = name + "=" + values[i]
	}
	return version + "; " + strings.Join(pairs, ", ")
}

// PoolURL is dbURL with pool_max_conns set, which sizes the pgxpool opened on it: pgxpool's
// default of max(4, NumCPU) connections would queue requests inside the server long before
// PostgreSQL is busy, and a deployment sets pool_max_conns in DATABASE_URL the same way.
func PoolURL(dbURL string, maxConns int) (*url.URL, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, err
	}
	query := u.Query()
	query.Set("pool_max_conns", strconv.Itoa(maxConns))
	u.RawQuery = query.Encode()
	return u, nil
}

// Listen opens a listener on a free port of the loopback interface, where a tool's servers and
// clients meet, and returns it with its http:// base URL.
func Listen() (ln net.Listener, baseURL string, err error) {
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	return ln, "http://" + ln.Addr().String(), nil
}

// Serve runs serve in its own goroutine until the stop it returns is called; stop cancels serve's
// context and returns what serve returned. That context keeps ctx's values but not its
// cancellation: an interrupted run stops its servers in its teardown, in order, not all at once.
func Serve(ctx context.Context, serve func(ctx context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- serve(ctx) }()
	return func() error {
		cancel()
		return <-served
	}
}

// SessionCookie is the name the desk gives its session cookie (internal/server's, unexported).
const SessionCookie = "desk_session"

// Login logs in at the desk at base through its login form, as a browser posts it, and returns
// the session token.
func Login(ctx context.Context, client *http.Client, base, email, password string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/login",
		strings.NewReader(url.Values{"email": {email}, "password": {password}}.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }() // the body has been read; a close error cannot change the answer
	// What the page says is no business of the tool's: the status and the cookie are the answer.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusSeeOther {
		return "", fmt.Errorf("login %s: status %d, want 303", email, resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie && c.Value != "" {
			return c.Value, nil
		}
	}
	return "", fmt.Errorf("login %s: no %s cookie", email, SessionCookie)
}
