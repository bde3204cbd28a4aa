package desk

import (
	"fmt"
	"net/url"
	"time"
)

// ParseSpan reads the since and until parameters every filtered read of the log takes (the eval
// export, the audit trail): each an RFC 3339 time or a date, since at or after, until before;
// either may be absent (zero). A BadRequest names the parameter at fault.
func ParseSpan(q url.Values) (since, until time.Time, err error) {
	return ParseSpanOf(q, "since", "until")
}

// ParseSpanOf reads a span from the parameters named sinceName and untilName, as ParseSpan does.
func ParseSpanOf(q url.Values, sinceName, untilName string) (since, until time.Time, err error) {
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{sinceName, &since}, {untilName, &until}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			if t, err = time.Parse(time.DateOnly, v); err != nil {
				return time.Time{}, time.Time{}, BadParam(p.name, "%s %q is neither an RFC 3339 time (2026-06-01T00:00:00Z) nor a date (2026-06-01)", p.name, v)
			}
		}
		*p.to = t
	}
	if !since.IsZero() && !until.IsZero() && !until.After(since) {
		return time.Time{}, time.Time{}, BadParam(untilName, "%s %s is not after %s %s", untilName, until.Format(time.RFC3339), sinceName, since.Format(time.RFC3339))
	}
	return since, until, nil
}

// BadParam is a BadRequest about one query parameter, named in its details.
func BadParam(param, format string, args ...any) error {
	return &Error{Code: BadRequest, Details: map[string]string{"param": param}, Message: fmt.Sprintf(format, args...)}
}
