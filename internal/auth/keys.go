package auth

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/desk"
)

// KeyInfo is a bot key as the admin's list shows it: never its secrets.
type KeyInfo struct {
	ID         int64
	Name       string
	Prefix     string
	QueueIDs   []int64
	WebhookURL string
	CreatedAt  time.Time
	LastUsed   *time.Time
	Revoked    *time.Time
	// PreviousSecretUntil is when the secret a rotation replaced stops signing, while it still does.
	PreviousSecretUntil *time.Time
}

const keyInfoSelect = `
	SELECT k.id, k.name, k.key_prefix, coalesce(k.webhook_url, ''), k.created_at, k.last_used_at, k.revoked_at,
		CASE WHEN k.webhook_secret_previous_until > now() THEN k.webhook_secret_previous_until END,
		coalesce(array_agg(q.queue_id ORDER BY q.queue_id) FILTER (WHERE q.queue_id IS NOT NULL), '{}')
	FROM api_keys k LEFT JOIN api_key_queues q ON q.api_key_id = k.id`

func scanKeyInfo(row pgx.Row) (KeyInfo, error) {
	var k KeyInfo
	err := row.Scan(&k.ID, &k.Name, &k.Prefix, &k.WebhookURL, &k.CreatedAt, &k.LastUsed, &k.Revoked, &k.PreviousSecretUntil, &k.QueueIDs)
	if errors.Is(err, pgx.ErrNoRows) {
		return KeyInfo{}, desk.Errorf(desk.NotFound, "no such API key")
	}
	return k, err
}

// APIKeys lists every key, live ones first, newest first.
func (s *Service) APIKeys(ctx context.Context) ([]KeyInfo, error) {
	rows, err := s.db.Query(ctx, keyInfoSelect+` GROUP BY k.id ORDER BY k.revoked_at IS NOT NULL, k.id DESC`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (KeyInfo, error) { return scanKeyInfo(row) })
}

// APIKeyByID reads one key.
func (s *Service) APIKeyByID(ctx context.Context, id int64) (KeyInfo, error) {
	return scanKeyInfo(s.db.QueryRow(ctx, keyInfoSelect+` WHERE k.id = $1 GROUP BY k.id`, id))
}

// KeyReach is what an admin edits of a live key: where it may send and where its webhooks go.
type KeyReach struct {
	QueueIDs   []int64
	WebhookURL string
	// AllowPrivateWebhook is the deployment's WEBHOOK_ALLOW_PRIVATE, as in NewAPIKey.
	AllowPrivateWebhook bool
}

// SetKeyReach changes a live key's queues and webhook URL inside tx and returns what they were.
// Every bad field is named at once; a revoked key is a Conflict.
func SetKeyReach(ctx context.Context, tx pgx.Tx, id int64, r KeyReach) (KeyInfo, error) {
	bad := desk.Fields{}
	checkReach(ctx, bad, r.QueueIDs, r.WebhookURL, r.AllowPrivateWebhook)
	if err := bad.Err(); err != nil {
		return KeyInfo{}, err
	}
	was, err := lockKey(ctx, tx, id)
	if err != nil {
		return KeyInfo{}, err
	}
	if was.Revoked != nil {
		return KeyInfo{}, desk.Errorf(desk.Conflict, "key %s is revoked", was.Name)
	}
	ids := slices.Sorted(slices.Values(r.QueueIDs))
	_, err = tx.Exec(ctx, `
		WITH gone AS (DELETE FROM api_key_queues WHERE api_key_id = $1 AND NOT queue_id = ANY($3)),
			added AS (INSERT INTO api_key_queues (api_key_id, queue_id) SELECT $1, unnest($3::bigint[]) ON CONFLICT DO NOTHING)
		UPDATE api_keys SET webhook_url = NULLIF($2, '') WHERE id = $1`, id, r.WebhookURL, ids)
	return was, err
}

// RevokeAPIKey turns a key off for good inside tx; false when it was revoked already. The caller
// drops cached keys once tx commits (ForgetBots), here and, through the log, on every instance.
func RevokeAPIKey(ctx context.Context, tx pgx.Tx, id int64) (KeyInfo, bool, error) {
	was, err := lockKey(ctx, tx, id)
	if err != nil || was.Revoked != nil {
		return was, false, err
	}
	_, err = tx.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE id = $1`, id)
	return was, err == nil, err
}

func lockKey(ctx context.Context, tx pgx.Tx, id int64) (KeyInfo, error) {
	if _, err := tx.Exec(ctx, `SELECT FROM api_keys WHERE id = $1 FOR UPDATE`, id); err != nil {
		return KeyInfo{}, err
	}
	return scanKeyInfo(tx.QueryRow(ctx, keyInfoSelect+` WHERE k.id = $1 GROUP BY k.id`, id))
}

// ForgetBots drops this instance's cached keys: a key revoked or changed is asked of the database
// on its next request. Keys change rarely, so forgetting them all costs one query per busy key.
func (s *Service) ForgetBots() {
	s.botsMu.Lock()
	defer s.botsMu.Unlock()
	s.botForgets.Add(1)
	clear(s.bots)
}
