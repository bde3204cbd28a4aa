package postgres

import (
	"context"
	"testing"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// A desk connection left idle inside a transaction holds back every browser's live updates until
// it ends, so the pool's connections end such a transaction after a while, unless the database
// URL says otherwise.
func TestOpenBoundsIdleTransactions(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	for _, c := range []struct{ url, want string }{
		{url, DefaultIdleInTransactionTimeout},
		{url + "&idle_in_transaction_session_timeout=5s", "5s"},
		{url + "&idle_in_transaction_session_timeout=0", "0"},
	} {
		pool, err := Open(context.Background(), c.url, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = pool.QueryRow(context.Background(), `SHOW idle_in_transaction_session_timeout`).Scan(&got)
		pool.Close()
		if err != nil || got != c.want {
			t.Errorf("%s: idle_in_transaction_session_timeout %q, %v; want %q", c.url, got, err, c.want)
		}
	}
}
