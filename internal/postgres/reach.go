package postgres

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
)

// outOfReachStates are the SQLSTATEs, or classes of them, that say the database is out of reach
// or going away rather than that the statement is wrong: connection exceptions, the server shutting
// down (admin, crash, cannot connect now), and too many connections.
var outOfReachStates = []string{"08", "57P01", "57P02", "57P03", "53300"}

// OutOfReach reports whether err says the database cannot be reached just now (down, restarting,
// out of connections, the connection cut), as opposed to a statement or a bug that failed: the
// first passes when the database is back, so a caller retries and logs it as a warning.
func OutOfReach(err error) bool {
	var (
		pg      *pgconn.PgError
		connect *pgconn.ConnectError
		netErr  net.Error
	)
	if errors.As(err, &pg) {
		for _, state := range outOfReachStates {
			if strings.HasPrefix(pg.Code, state) {
				return true
			}
		}
		return false
	}
	return errors.As(err, &connect) || errors.As(err, &netErr) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, puddle.ErrClosedPool)
}
