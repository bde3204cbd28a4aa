package actions

import (
	"context"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

// checkHandBack checks the agent's part of a hand-back, naming every bad field at once: its texts
// and, unless keys is nil, that the entities it names are among keys, the package's. No text may
// carry a masked value's stand-in: what the agent saw masked is never echoed to the bot.
func checkHandBack(back handoff.HandBack, keys []string) error {
	bad := desk.Fields{}
	text := func(field, v string, limit int) {
		switch n := utf8.RuneCountInString(v); {
		case n > limit:
			bad.Add(field, "%s is %d characters; at most %d are allowed", field, n, limit)
		case strings.Contains(v, handoff.Masked):
			bad.Add(field, "%s contains %s, which stands for a value you may not see: write the value out or leave it out", field, handoff.Masked)
		}
	}
	text("done", back.Done, handoff.MaxHandBackDone)
	if strings.ContainsAny(back.Done, "\r\n") {
		bad.Add("done", "done is one line: what you resolved or did")
	}
	text("instruction", back.Instruction, handoff.MaxHandBackInstruction)
	entity := func(field, key string) {
		if keys != nil && !slices.Contains(keys, key) {
			bad.Add(field, "%q is not an entity of the package (it has: %s)", key, strings.Join(keys, ", "))
		}
	}
	for _, key := range back.Confirmed {
		entity("confirmed", key)
	}
	for key, v := range back.Corrected {
		text("corrected."+key, v, handoff.MaxHandBackValue)
		entity("corrected."+key, key)
		if slices.Contains(back.Confirmed, key) {
			bad.Add("corrected."+key, "%s is both confirmed and corrected: choose one", key)
		}
	}
	return bad.Err()
}

// entitiesSQL is the keys of the structured_entities of the package row h, sorted.
const entitiesSQL = `(SELECT coalesce(array_agg(k ORDER BY k), '{}') FROM json_object_keys(coalesce(h.package->'structured_entities', '{}')) k)`

// entityKeys are the package entities a hand-back names, confirmed or corrected.
func entityKeys(back handoff.HandBack) []string {
	keys := slices.Concat(back.Confirmed, slices.Collect(maps.Keys(back.Corrected)))
	if keys == nil {
		return []string{} // not NULL, which nothing contains
	}
	return keys
}

// checkHandBackOf checks a hand-back on the package row it closes, which the caller locked.
func checkHandBackOf(ctx context.Context, tx pgx.Tx, rowID int64, back handoff.HandBack) error {
	var keys []string
	if err := tx.QueryRow(ctx, `SELECT `+entitiesSQL+` FROM handoffs h WHERE h.id = $1`, rowID).Scan(&keys); err != nil {
		return err
	}
	return checkHandBack(back, keys)
}

// handBackSQL is the hand-back a close stores on the package row h: the agent's part (back, a
// handoff.HandBack) with the link to the thread (base, the desk's address, before its path) and
// where the thread ends, read in the close's own statement. The webhook, the package's record
// and the eval record of the close copy it from the row, so that each gives the bot a link it
// can follow as it is; a later close writes it anew, with the address of its day.
func handBackSQL(back, base string) string {
	return back + `::jsonb || jsonb_build_object('thread', ` + base + `::text || '/api/v1/handoffs/' || h.handoff_id || '/messages') || ` + conversation.TailSQL("h.id")
}
