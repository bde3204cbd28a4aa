package access

import (
	"context"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff/handofftest"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
)

type adminFixture struct {
	db     *pgxpool.Pool
	people *auth.Service
	queues *queue.Service
	s      *Service
	admin  auth.User
}

func newAdminFixture(t *testing.T) *adminFixture {
	t.Helper()
	db := pgtest.New(t)
	f := &adminFixture{db: db, people: auth.NewService(db), queues: queue.NewService(db)}
	f.s = New(db, f.people)
	f.admin = f.user(t, "ada@example.com", auth.RoleAdmin)
	return f
}

func (f *adminFixture) user(t *testing.T, email string, role auth.Role) auth.User {
	t.Helper()
	u, err := f.people.CreateUser(context.Background(), auth.NewUser{Email: email, DisplayName: email, Role: role, Password: "long-enough"})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// newQueue creates a queue through the admin's form with the defaults and the given values.
func (f *adminFixture) newQueue(t *testing.T, values url.Values) queue.Queue {
	t.Helper()
	form := url.Values(queue.Values(queue.Defaults()))
	for k, v := range values {
		form[k] = v
	}
	q, err := f.s.SaveQueue(context.Background(), 0, form, f.admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Two admins demoting each other at once, or disabling each other, cannot leave the desk without
// one: exactly one of the two changes goes through.
func TestTheLastAdminStaysUnderConcurrentChanges(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	ctx := context.Background()
	for round, change := range []func(id, actor int64) error{
		func(id, actor int64) error { return f.s.SetRole(ctx, id, auth.RoleAgent, actor) },
		func(id, actor int64) error { return f.s.Disable(ctx, id, actor) },
	} {
		bea := f.user(t, "bea"+string(rune('0'+round))+"@example.com", auth.RoleAdmin)
		others := []int64{f.admin.ID, bea.ID}
		// Each round starts with exactly these two admins, whoever the round before left.
		if _, err := f.db.Exec(ctx, `UPDATE users SET role = CASE WHEN id = ANY($1) THEN 'admin' ELSE 'agent' END, disabled = false`, others); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, id := range others {
			wg.Go(func() { errs[i] = change(id, others[1-i]) })
		}
		wg.Wait()
		refused := 0
		for _, err := range errs {
			if desk.ErrorCode(err) == desk.Conflict {
				refused++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		var admins int
		if err := f.db.QueryRow(ctx, `SELECT count(*) FROM users WHERE role = 'admin' AND NOT disabled`).Scan(&admins); err != nil {
			t.Fatal(err)
		}
		if refused != 1 || admins != 1 {
			t.Errorf("round %d: %d of the two changes refused, %d admins left; want 1 and 1", round, refused, admins)
		}
	}
}

// A queue's parent, escalation and overflow are checked against the other queues, every bad field
// at once; a change is logged with each setting's before and after.
func TestSaveQueueChecksLinksAndLogsBeforeAndAfter(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	ctx := context.Background()
	top := f.newQueue(t, url.Values{"name": {"top"}})
	child := f.newQueue(t, url.Values{"name": {"child"}, "parent": {itoa(top.ID)}})

	form := url.Values(queue.Values(top))
	form.Set("parent", itoa(child.ID))
	form.Set("escalation_queue", itoa(top.ID))
	form.Set("overflow_queue", itoa(top.ID))
	form.Set("sla", "0s")
	_, err := f.s.SaveQueue(ctx, top.ID, form, f.admin.ID)
	bad := desk.FieldsOf(err)
	for _, field := range []string{"parent", "escalation_queue", "overflow_queue", "sla"} {
		if bad[field] == "" {
			t.Errorf("field %s: no complaint in %v", field, err)
		}
	}

	form = url.Values(queue.Values(top))
	form.Set("pii_min_role", "agent")
	form.Set("guard_pair_cooldown", "1h")
	if _, err := f.s.SaveQueue(ctx, top.ID, form, f.admin.ID); err != nil {
		t.Fatal(err)
	}
	var changed map[string][]string
	if err := f.db.QueryRow(ctx, `SELECT detail->'changed' FROM events WHERE kind = 'queue_changed' AND queue_id = $1 AND actor_user = $2`,
		top.ID, f.admin.ID).Scan(&changed); err != nil {
		t.Fatal(err)
	}
	if len(changed) != 2 || changed["pii_min_role"][0] != "supervisor" || changed["pii_min_role"][1] != "agent" ||
		changed["guard_pair_cooldown"][0] != "30m" || changed["guard_pair_cooldown"][1] != "1h" {
		t.Errorf("the log says %v changed, want pii_min_role supervisor → agent and guard_pair_cooldown 30m → 1h", changed)
	}
}

// A queue that holds open packages is disabled only with somewhere to move them; they move there,
// each with a transfer the bot hears of.
func TestDisableQueueMovesOpenPackages(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	ctx := context.Background()
	from := f.newQueue(t, url.Values{"name": {"old"}})
	to := f.newQueue(t, url.Values{"name": {"new"}})
	key, err := f.people.CreateAPIKey(ctx, auth.NewAPIKey{Name: "bot", QueueIDs: []int64{from.ID, to.ID}})
	if err != nil {
		t.Fatal(err)
	}
	in := intake.New(f.db, time.Now, nil, nil)
	var src handofftest.Numbered
	for range 2 {
		if _, err := in.Submit(ctx, intake.Sender{APIKeyID: key.ID, QueueIDs: key.QueueIDs}, src.Next(t, "old")); err != nil {
			t.Fatal(err)
		}
	}
	err = f.s.DisableQueue(ctx, from.ID, 0, f.admin.ID)
	if desk.ErrorCode(err) != desk.Conflict || desk.FieldsOf(err)["move_to"] == "" {
		t.Fatalf("disabling a queue with open packages and nowhere to move them: %v, want a Conflict naming move_to", err)
	}
	if err := f.s.DisableQueue(ctx, from.ID, from.ID, f.admin.ID); desk.ErrorCode(err) != desk.Invalid {
		t.Errorf("moving the packages into the queue being disabled: %v, want Invalid", err)
	}
	if err := f.s.DisableQueue(ctx, from.ID, to.ID, f.admin.ID); err != nil {
		t.Fatal(err)
	}
	var left, moved, transfers int
	var enabled bool
	if err := f.db.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM handoffs WHERE queue_id = $1 AND closed_at IS NULL),
			(SELECT count(*) FROM handoffs WHERE queue_id = $2 AND status = 'queued'),
			(SELECT count(*) FROM events WHERE kind = 'transferred' AND from_queue_id = $1 AND queue_id = $2),
			(SELECT enabled FROM queues WHERE id = $1)`, from.ID, to.ID).Scan(&left, &moved, &transfers, &enabled); err != nil {
		t.Fatal(err)
	}
	if left != 0 || moved != 2 || transfers != 2 || enabled {
		t.Errorf("after disabling: %d open left, %d moved, %d transfers logged, enabled %v; want 0, 2, 2, false", left, moved, transfers, enabled)
	}
}

// A revoked key is refused at once by the instance that revoked it, and a key's queues and
// webhook URL change with their before and after logged.
func TestKeysAreEditedAndRevoked(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	ctx := context.Background()
	a := f.newQueue(t, url.Values{"name": {"a"}})
	b := f.newQueue(t, url.Values{"name": {"b"}})
	issued, err := f.s.CreateAPIKey(ctx, auth.NewAPIKey{Name: "bot", QueueIDs: []int64{a.ID}}, f.admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.people.Bot(ctx, issued.Key); err != nil {
		t.Fatal(err)
	}
	err = f.s.EditAPIKey(ctx, issued.ID, auth.KeyReach{WebhookURL: "ftp://example.com"}, f.admin.ID)
	if bad := desk.FieldsOf(err); bad["queues"] == "" || bad["webhook_url"] == "" {
		t.Errorf("a key with no queues and an ftp webhook: %v, want both fields named", err)
	}
	if err := f.s.EditAPIKey(ctx, issued.ID, auth.KeyReach{QueueIDs: []int64{b.ID, a.ID}, WebhookURL: "https://bot.example.com/hooks"}, f.admin.ID); err != nil {
		t.Fatal(err)
	}
	k, err := f.people.Bot(ctx, issued.Key)
	if err != nil || !k.AllowsQueue(b.ID) || k.WebhookURL != "https://bot.example.com/hooks" {
		t.Errorf("after the edit the key reads %+v (%v), want queue b and the new URL at once", k, err)
	}
	if err := f.s.RevokeAPIKey(ctx, issued.ID, f.admin.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.people.Bot(ctx, issued.Key); desk.ErrorCode(err) != desk.Unauthorized {
		t.Errorf("the revoked key's next request: %v, want Unauthorized", err)
	}
	var kinds []string
	if err := f.db.QueryRow(ctx, `SELECT array_agg(kind ORDER BY seq) FROM events WHERE (detail->>'api_key_id')::bigint = $1`, issued.ID).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 3 || kinds[0] != "api_key_created" || kinds[1] != "api_key_changed" || kinds[2] != "api_key_revoked" {
		t.Errorf("the key's log is %v, want created, changed, revoked", kinds)
	}
}

// A reset password ends the person's sessions and must be changed at the next login; the change
// checks the temporary password and keeps the session it is made from.
func TestResetPasswordMustBeChanged(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	ctx := context.Background()
	dana := f.user(t, "dana@example.com", auth.RoleAgent)
	old, err := f.people.StartSession(ctx, dana.ID)
	if err != nil {
		t.Fatal(err)
	}
	temporary, err := f.s.ResetPassword(ctx, dana.ID, f.admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.people.VerifySession(ctx, old.Token); desk.ErrorCode(err) != desk.NotFound {
		t.Errorf("a session from before the reset: %v, want it ended", err)
	}
	u, err := f.people.Authenticate(ctx, "dana@example.com", temporary, "192.0.2.1")
	if err != nil || !u.MustChangePassword {
		t.Fatalf("login with the temporary password: %+v, %v; want it to work and ask for a new one", u, err)
	}
	sess, err := f.people.StartSession(ctx, dana.ID)
	if err != nil {
		t.Fatal(err)
	}
	err = f.s.ChangePassword(ctx, dana.ID, "wrong", "short", sess.Token)
	if bad := desk.FieldsOf(err); bad["current"] == "" || bad["password"] == "" {
		t.Errorf("a wrong current password and a short new one: %v, want both named", err)
	}
	if err := f.s.ChangePassword(ctx, dana.ID, temporary, "a new long one", sess.Token); err != nil {
		t.Fatal(err)
	}
	if u, _, err := f.people.VerifySession(ctx, sess.Token); err != nil || u.MustChangePassword {
		t.Errorf("the session the change was made from: %+v, %v; want it kept, with nothing more to change", u, err)
	}
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// A dead delivery, or one that failed and waits to retry, is sent again from its first attempt;
// a delivered one, or another key's, is not.
func TestRedeliverDeadOrFailedDeliveries(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	ctx := context.Background()
	q := f.newQueue(t, url.Values{"name": {"a"}})
	mine, err := f.people.CreateAPIKey(ctx, auth.NewAPIKey{Name: "mine", QueueIDs: []int64{q.ID}, WebhookURL: "https://bot.example.com/hooks"})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := f.people.CreateAPIKey(ctx, auth.NewAPIKey{Name: "theirs", QueueIDs: []int64{q.ID}})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int64{}
	for _, r := range []struct{ name, state, lastError string }{
		{"dead", "dead", "connection refused"}, {"failed", "pending", "timeout"}, {"delivered", "delivered", ""},
	} {
		var id int64
		if err := f.db.QueryRow(ctx, `INSERT INTO webhook_outbox (event_id, api_key_id, handoff_id, event, payload, state, attempts, last_error, next_attempt_at)
			VALUES ($1, $2, 'ho_1', 'queued', '{}', $3, 12, NULLIF($4, ''), now() + interval '1 hour') RETURNING id`,
			"ev_"+r.name, mine.ID, r.state, r.lastError).Scan(&id); err != nil {
			t.Fatal(err)
		}
		rows[r.name] = id
	}
	if err := f.s.Redeliver(ctx, theirs.ID, rows["dead"], f.admin.ID); desk.ErrorCode(err) != desk.NotFound {
		t.Errorf("another key's delivery: %v, want NotFound", err)
	}
	if err := f.s.Redeliver(ctx, mine.ID, rows["delivered"], f.admin.ID); desk.ErrorCode(err) != desk.Conflict {
		t.Errorf("a delivered delivery: %v, want Conflict", err)
	}
	for _, name := range []string{"dead", "failed"} {
		if err := f.s.Redeliver(ctx, mine.ID, rows[name], f.admin.ID); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var state string
		var attempts int
		var due bool
		if err := f.db.QueryRow(ctx, `SELECT state, attempts, next_attempt_at <= now() FROM webhook_outbox WHERE id = $1`, rows[name]).
			Scan(&state, &attempts, &due); err != nil {
			t.Fatal(err)
		}
		if state != "pending" || attempts != 0 || !due {
			t.Errorf("%s after Redeliver: %s, %d attempts, due %v; want pending, 0, due now", name, state, attempts, due)
		}
	}
	var logged int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM events WHERE kind = 'webhook_redelivered' AND actor_user = $1`, f.admin.ID).Scan(&logged); err != nil || logged != 2 {
		t.Errorf("%d redeliveries logged (%v), want 2", logged, err)
	}
}

// A package submitted while a queue is being disabled never lands in it: intake waits for the
// disable and then finds the queue gone, rather than inserting after the disable counted the
// queue's open packages.
func TestDisablingAQueueRacesNoPackageIntoIt(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	ctx := context.Background()
	q := f.newQueue(t, url.Values{"name": {"closing"}})
	key, err := f.people.CreateAPIKey(ctx, auth.NewAPIKey{Name: "bot", QueueIDs: []int64{q.ID}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below; a failed test leaves nothing to keep
	if _, err := queue.SetEnabled(ctx, tx, q.ID, false); err != nil {
		t.Fatal(err)
	}
	submitted := make(chan error, 1)
	var src handofftest.Numbered
	p := src.Next(t, "closing")
	go func() {
		_, err := intake.New(f.db, time.Now, nil, nil).Submit(ctx, intake.Sender{APIKeyID: key.ID, QueueIDs: key.QueueIDs}, p)
		submitted <- err
	}()
	// The disable is still open: intake must be waiting for it, not done.
	select {
	case err := <-submitted:
		t.Fatalf("intake finished (%v) while the queue's disable was open; want it to wait", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-submitted:
		if err == nil {
			t.Fatal("intake admitted a package into the queue disabled meanwhile")
		}
	case <-time.After(time.Minute):
		t.Fatal("intake still waits after the disable committed")
	}
	var n int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM handoffs WHERE queue_id = $1`, q.ID).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d packages in the disabled queue (%v), want none", n, err)
	}
}
