package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/webhook"
)

// APIKey is a bot's credential: which queues it may send to and where its webhooks go.
type APIKey struct {
	ID            int64
	Name          string
	Prefix        string
	QueueIDs      []int64
	WebhookURL    string
	WebhookSecret string
}

// NewAPIKey is what `web apikey add` and the admin form supply.
type NewAPIKey struct {
	Name       string
	QueueIDs   []int64
	WebhookURL string
	// AllowPrivateWebhook lets the webhook URL point at a loopback, private or other address that
	// is not public: the deployment's WEBHOOK_ALLOW_PRIVATE, not the key's own choice.
	AllowPrivateWebhook bool
}

// IssuedAPIKey is a new key with the two secrets shown once and never again.
type IssuedAPIKey struct {
	APIKey
	Key string
}

const (
	keyPrefix    = "hdk_"
	prefixLength = len(keyPrefix) + 8 // the part stored in clear to find the row
)

func randomToken(n int) (string, error) {
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

// Keys are 32 random bytes, far beyond guessing, so a fast hash is enough to keep a leaked table
// from being replayed; a slow password hash would cost every bot request for nothing.
func hashKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

func (n *NewAPIKey) validate(ctx context.Context) error {
	n.Name = strings.TrimSpace(n.Name)
	bad := desk.Fields{}
	if n.Name == "" || len(n.Name) > 100 {
		bad.Add("name", "key name must be 1-100 characters")
	}
	checkReach(ctx, bad, n.QueueIDs, n.WebhookURL, n.AllowPrivateWebhook)
	return bad.Err()
}

// checkReach adds to bad what is wrong with a key's queues and webhook URL.
func checkReach(ctx context.Context, bad desk.Fields, queueIDs []int64, webhookURL string, allowPrivate bool) {
	if len(queueIDs) == 0 {
		bad.Add("queues", "a key needs at least one queue")
	}
	if webhookURL != "" {
		if err := webhook.CheckURL(ctx, webhookURL, allowPrivate); err != nil {
			bad.Add("webhook_url", "%s", desk.ErrorMessage(err))
		}
	}
}

// CreateAPIKey issues a key. The key itself is stored only as a hash.
func (s *Service) CreateAPIKey(ctx context.Context, n NewAPIKey) (IssuedAPIKey, error) {
	return IssueAPIKey(ctx, s.db, n)
}

// IssueAPIKey is Service.CreateAPIKey inside db, a pool or a caller's transaction.
func IssueAPIKey(ctx context.Context, db beginner, n NewAPIKey) (IssuedAPIKey, error) {
	if err := n.validate(ctx); err != nil {
		return IssuedAPIKey{}, err
	}
	body, err := randomToken(32)
	if err != nil {
		return IssuedAPIKey{}, err
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return IssuedAPIKey{}, err
	}
	return insertAPIKey(ctx, db, n, keyPrefix+body, secret)
}

// DefaultSecretOverlap is how long a rotated webhook secret keeps signing beside the new one: a
// day, for a bot's operators to deploy the new secret without losing a delivery.
const DefaultSecretOverlap = 24 * time.Hour

// MaxSecretOverlap bounds the overlap: a secret thought to have leaked must not sign for months.
const MaxSecretOverlap = 30 * 24 * time.Hour

// RotatedSecret is a key's new webhook secret, shown once, and until when the old one also signs
// (zero when it stopped at once).
type RotatedSecret struct {
	Key           APIKey
	Secret        string
	PreviousUntil time.Time
}

// RotateWebhookSecret gives the key a new webhook secret inside tx. For overlap after now, every
// delivery is signed with the new secret and the one it replaces; with no overlap the old one
// stops at once (a leaked secret). Only the secret just replaced is kept: a second rotation
// within the window drops the older one. NotFound when no live key has the id.
func RotateWebhookSecret(ctx context.Context, tx pgx.Tx, keyID int64, overlap time.Duration, now time.Time) (RotatedSecret, error) {
	if overlap < 0 || overlap > MaxSecretOverlap {
		return RotatedSecret{}, &desk.Error{Code: desk.Invalid, Details: map[string]string{"overlap": fmt.Sprintf("between 0s and %s", MaxSecretOverlap)},
			Message: fmt.Sprintf("overlap %s must be between 0 and %s", overlap, MaxSecretOverlap)}
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return RotatedSecret{}, err
	}
	r := RotatedSecret{Secret: secret}
	var until *time.Time
	if overlap > 0 {
		r.PreviousUntil = now.Add(overlap)
		until = &r.PreviousUntil
	}
	var webhookURL *string
	err = tx.QueryRow(ctx, `
		UPDATE api_keys SET webhook_secret = $2,
			webhook_secret_previous = CASE WHEN $3::timestamptz IS NOT NULL THEN webhook_secret END,
			webhook_secret_previous_until = $3
		WHERE id = $1 AND revoked_at IS NULL
		RETURNING id, name, key_prefix, webhook_url`, keyID, secret, until).
		Scan(&r.Key.ID, &r.Key.Name, &r.Key.Prefix, &webhookURL)
	if errors.Is(err, pgx.ErrNoRows) {
		return RotatedSecret{}, desk.Errorf(desk.NotFound, "no live API key has id %d", keyID)
	}
	if webhookURL != nil {
		r.Key.WebhookURL = *webhookURL
	}
	r.Key.WebhookSecret = secret
	return r, err
}

// APIKeyByName finds a live key by its name, for the command line.
func (s *Service) APIKeyByName(ctx context.Context, name string) (APIKey, error) {
	var k APIKey
	var webhookURL *string
	err := s.db.QueryRow(ctx, `SELECT id, name, key_prefix, webhook_url FROM api_keys WHERE name = $1 AND revoked_at IS NULL`,
		strings.TrimSpace(name)).Scan(&k.ID, &k.Name, &k.Prefix, &webhookURL)
	if errors.Is(err, pgx.ErrNoRows) {
		return APIKey{}, desk.Errorf(desk.NotFound, "no live API key is named %q", name)
	}
	if webhookURL != nil {
		k.WebhookURL = *webhookURL
	}
	return k, err
}

// InsertAPIKeyWithSecrets stores a key whose secrets the caller chose. Only the demo seed uses it,
// so that the printed demo key stays the same across `make run`s.
func (s *Service) InsertAPIKeyWithSecrets(ctx context.Context, n NewAPIKey, key, webhookSecret string) (IssuedAPIKey, error) {
	if err := n.validate(ctx); err != nil {
		return IssuedAPIKey{}, err
	}
	if !strings.HasPrefix(key, keyPrefix) || len(key) < prefixLength+16 {
		return IssuedAPIKey{}, desk.Errorf(desk.Invalid, "key must start with %s and be at least %d characters", keyPrefix, prefixLength+16)
	}
	return insertAPIKey(ctx, s.db, n, key, webhookSecret)
}

// beginner is a pool or a transaction, in which insertAPIKey nests its own (a savepoint).
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

func insertAPIKey(ctx context.Context, db beginner, n NewAPIKey, key, webhookSecret string) (IssuedAPIKey, error) {
	issued := IssuedAPIKey{Key: key, APIKey: APIKey{
		Name: n.Name, Prefix: key[:prefixLength], QueueIDs: n.QueueIDs, WebhookURL: n.WebhookURL, WebhookSecret: webhookSecret,
	}}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `
			INSERT INTO api_keys (name, key_prefix, key_hash, webhook_url, webhook_secret)
			VALUES ($1, $2, $3, NULLIF($4, ''), $5) RETURNING id`,
			n.Name, issued.Prefix, hashKey(key), n.WebhookURL, webhookSecret).Scan(&issued.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO api_key_queues (api_key_id, queue_id) SELECT $1, unnest($2::bigint[])`,
			issued.ID, n.QueueIDs)
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return IssuedAPIKey{}, &desk.Error{Code: desk.Conflict, Message: fmt.Sprintf("an API key named %q already exists", n.Name),
			Details: map[string]string{"name": "a key with this name already exists"}}
	}
	return issued, err
}

// botCacheTTL is how long a verified key is trusted without asking the database again: a bot
// sends many packages a second, and a revocation or a queue change reaches every instance within
// this time.
const botCacheTTL = 5 * time.Second

// botCacheMax bounds the cache; past it the cache starts over rather than grow.
const botCacheMax = 10000

type cachedBot struct {
	key     APIKey
	hash    []byte
	expires time.Time
}

// Bot authenticates a bearer key. Unknown, malformed and revoked keys all answer Unauthorized.
func (s *Service) Bot(ctx context.Context, key string) (APIKey, error) {
	unauthorized := desk.Errorf(desk.Unauthorized, "the API key is missing, unknown or revoked")
	// A key the desk issued is ASCII; the prefix of any other could be bytes that are not UTF-8,
	// which the lookup by prefix cannot even send to PostgreSQL.
	if !strings.HasPrefix(key, keyPrefix) || len(key) <= prefixLength || strings.ContainsFunc(key, func(r rune) bool { return r >= utf8.RuneSelf }) {
		return APIKey{}, unauthorized
	}
	hash := hashKey(key)
	now := s.now()
	s.botsMu.Lock()
	cached, ok := s.bots[key[:prefixLength]]
	s.botsMu.Unlock()
	if ok && now.Before(cached.expires) && subtle.ConstantTimeCompare(cached.hash, hash) == 1 {
		return cached.key, nil
	}
	forgets := s.botForgets.Load()
	k, err := s.lookupBot(ctx, key, hash, unauthorized)
	if err != nil {
		return APIKey{}, err
	}
	s.botsMu.Lock()
	// A key read while ForgetBots ran may be as it was before a revocation: not kept.
	if s.botForgets.Load() == forgets {
		if len(s.bots) >= botCacheMax {
			clear(s.bots)
		}
		s.bots[k.Prefix] = cachedBot{key: k, hash: hash, expires: now.Add(botCacheTTL)}
	}
	s.botsMu.Unlock()
	return k, nil
}

func (s *Service) lookupBot(ctx context.Context, key string, hash []byte, unauthorized error) (APIKey, error) {
	var k APIKey
	var storedHash []byte
	var webhookURL *string
	err := s.db.QueryRow(ctx, `
		SELECT k.id, k.name, k.key_prefix, k.key_hash, k.webhook_url, k.webhook_secret,
			coalesce(array_agg(q.queue_id) FILTER (WHERE q.queue_id IS NOT NULL), '{}')
		FROM api_keys k LEFT JOIN api_key_queues q ON q.api_key_id = k.id
		WHERE k.key_prefix = $1 AND k.revoked_at IS NULL
		GROUP BY k.id`, key[:prefixLength]).
		Scan(&k.ID, &k.Name, &k.Prefix, &storedHash, &webhookURL, &k.WebhookSecret, &k.QueueIDs)
	if errors.Is(err, pgx.ErrNoRows) {
		return APIKey{}, unauthorized
	}
	if err != nil {
		return APIKey{}, err
	}
	if subtle.ConstantTimeCompare(storedHash, hash) != 1 {
		return APIKey{}, unauthorized
	}
	if webhookURL != nil {
		k.WebhookURL = *webhookURL
	}
	// The admin's list says when each key was last used; a cache miss, at most every botCacheTTL
	// per instance and key, writes it at most once a minute.
	if _, err := s.db.Exec(ctx, `UPDATE api_keys SET last_used_at = $2
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2::timestamptz - interval '1 minute')`, k.ID, s.now()); err != nil {
		return APIKey{}, err
	}
	return k, nil
}

// AllowsQueue reports whether the key may send to the queue.
func (k APIKey) AllowsQueue(queueID int64) bool {
	for _, id := range k.QueueIDs {
		if id == queueID {
			return true
		}
	}
	return false
}
