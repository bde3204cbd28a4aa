// Package intake admits the packages bots send: it checks each against its target queue, applies
// the guards (per-contact limits, circular handoffs, one open handoff, long chains) and the
// queue's overflow policy under a per-contact lock, and inserts the admitted ones in batches that
// share a commit. It also answers bots about their packages (Get, ForContact) and routes SW4RM
// requests to a queue. Rows of handoffs are created here and changed only by package actions.
package intake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/handoffdesk/desk/internal/commit"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/tracing"
)

// Sender is the bot submitting a package: its key, the queues the key may send to, and the span
// of the bot's run that sent it (from the request's traceparent; none without one), which the
// package's span links to.
type Sender struct {
	APIKeyID int64
	QueueIDs []int64
	Run      trace.SpanContext
}

func (s Sender) allows(queueID int64) bool {
	for _, id := range s.QueueIDs {
		if id == queueID {
			return true
		}
	}
	return false
}

// Receipt is what intake answers a bot.
type Receipt struct {
	HandoffID string         `json:"handoff_id"`
	Status    handoff.Status `json:"status"`
	Queue     string         `json:"queue"`
	// Position counts the waiting packages that will be offered before this one (0: next), up
	// to maxPosition.
	Position int `json:"position"`
	// Escalated is set when a long handoff chain sent the package to the queue's escalation target.
	Escalated bool `json:"escalated,omitempty"`
	// A warm package's first ring, decided in its batch: the agent it rings, or, when it rings
	// nobody, the queue's estimated wait. Neither is set on a replay, or when the batch lost the
	// race for its agents twice: RingDecided tells, and actions.Ring answers them instead.
	OfferedTo            string `json:"offered_to,omitempty"`
	EstimatedWaitSeconds *int   `json:"estimated_wait_seconds,omitempty"`
	// Replayed is set when the same id and body had already been accepted.
	Replayed bool `json:"-"`
}

// RingDecided reports whether the receipt of a queued warm package says whom it rings or how long
// it may wait.
func (r Receipt) RingDecided() bool { return r.OfferedTo != "" || r.EstimatedWaitSeconds != nil }

// Intake puts packages from bots into queues.
type Intake struct {
	db      *pgxpool.Pool
	now     func() time.Time
	changed func() // called after a commit, to wake the live desk
	// ringDue is told, after a commit, when the earliest ring the batch started runs out or the
	// earliest warm wait of a package it left waiting ends (see OnRing).
	ringDue func(time.Time)
	// batches carries packages to PostgreSQL in batches. Only intake transactions take the
	// contact locks, so a batch waits at worst on another instance's batch.
	batches *commit.Convoy[*submission]
	tracing *tracing.Tracing
}

const (
	maxBatchSize = 32
	batchTimeout = 30 * time.Second
)

// New returns an Intake over db that tells time with now, calls changed after every committed
// change and traces packages with traces (nil: not at all).
func New(db *pgxpool.Pool, now func() time.Time, changed func(), traces *tracing.Tracing) *Intake {
	if changed == nil {
		changed = func() {}
	}
	if traces == nil {
		traces = tracing.Off()
	}
	in := &Intake{db: db, now: now, changed: changed, ringDue: func(time.Time) {}, tracing: traces}
	in.batches = commit.NewConvoy(takeBatch, in.write)
	return in
}

// OnRing makes intake tell due, after each commit that rang an agent or left a warm package
// waiting for one, when the earliest of those rings or warm waits runs out: the desk's sweeper
// (actions.Service.RingDue) ends them on time, not at its next tick. Call it before Submit.
func (in *Intake) OnRing(due func(time.Time)) { in.ringDue = due }

// submission is a package on its way into a batch, and then the answer for its bot.
type submission struct {
	sender            Sender
	p                 handoff.Package
	canonical, digest []byte
	done              chan struct{}
	receipt           Receipt
	err               error
	// trace is the package's span as stored with it (tracing.Stored); nil while tracing is off.
	trace *string
}

// newSubmission prepares p for a batch: its canonical form is what is stored, and its digest what
// tells a replay from a conflict.
func newSubmission(sender Sender, p handoff.Package) (*submission, error) {
	canonical, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	digest := sha256.Sum256(canonical)
	return &submission{sender: sender, p: p, canonical: canonical, digest: digest[:], done: make(chan struct{})}, nil
}

// Submit queues a decoded, valid package. The same id with the same body answers the first
// receipt again (Replayed); the same id with another body is a Conflict, and an id another key
// used is invalid (see idTaken). Guards are checked under a per-contact lock in the same
// transaction as the insert, so two racing requests for one contact cannot both pass.
//
// If ctx ends first Submit returns an *Unanswered, which wraps ctx's error: the package may still
// be queued by its batch, as when any answer is lost on the way, and the bot's retry with the same
// id is answered as a replay.
func (in *Intake) Submit(ctx context.Context, sender Sender, p handoff.Package) (Receipt, error) {
	s, err := newSubmission(sender, p)
	if err != nil {
		return Receipt{}, err
	}
	span := in.startPackage(ctx, s)
	// A package that leads its batch writes it on Join's goroutine: not this one, which must stop
	// waiting when ctx ends.
	go in.batches.Join(s)
	select {
	case <-s.done:
		span.SetAttributes(tracing.Queue.String(s.receipt.Queue), attribute.Bool("handoff.replayed", s.receipt.Replayed))
		tracing.End(span, s.err)
		return s.receipt, s.err
	case <-ctx.Done():
		tracing.End(span, ctx.Err())
		return Receipt{}, &Unanswered{Cause: ctx.Err(), s: s}
	}
}

// startPackage starts the package's span, whose context the package's row stores. It is the root
// of a trace of its own, linked to the bot's run and to the request that brought it: the package
// outlives the bot's run by minutes or hours, the desk decides whether it is sampled (a run the
// bot did not sample would leave every later link pointing at nothing), and each later span about
// the package links to it (docs/tracing.md).
func (in *Intake) startPackage(ctx context.Context, s *submission) trace.Span {
	if !in.tracing.On() {
		return trace.SpanFromContext(context.Background())
	}
	var links []trace.Link
	if s.sender.Run.IsValid() {
		links = append(links, trace.Link{SpanContext: s.sender.Run, Attributes: []attribute.KeyValue{tracing.LinkTo.String(tracing.ToBotRun)}})
	}
	if request := trace.SpanContextFromContext(ctx); request.IsValid() {
		links = append(links, trace.Link{SpanContext: request, Attributes: []attribute.KeyValue{tracing.LinkTo.String(tracing.ToIntake)}})
	}
	ctx, span := in.tracing.Start(ctx, "handoff.package", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(tracing.HandoffID.String(s.p.HandoffID), tracing.SourceRunID.String(s.p.SourceRunID),
			attribute.String("handoff.source_agent", s.p.SourceAgent)))
	s.trace = tracing.Stored(ctx)
	return span
}

// Unanswered is Submit's error when its context ended (the client left, or a deadline passed)
// before the package's batch answered. The package may be committed all the same: Outcome tells.
type Unanswered struct {
	Cause error
	s     *submission
}

func (u *Unanswered) Error() string {
	return "the request ended before its package's batch answered: " + u.Cause.Error()
}

func (u *Unanswered) Unwrap() error { return u.Cause }

// Outcome waits until the package's batch answers, or ctx ends, and returns what Submit would
// have returned had it waited.
func (u *Unanswered) Outcome(ctx context.Context) (Receipt, error) {
	select {
	case <-u.s.done:
		return u.s.receipt, u.s.err
	case <-ctx.Done():
		return Receipt{}, ctx.Err()
	}
}

// takeBatch takes up to maxBatchSize waiting submissions, at most one per contact and per handoff
// id: a second one must see what became of the first (an open handoff, a replay), so it waits for
// a later batch.
func takeBatch(waiting []*submission) (batch, rest []*submission) {
	contacts, ids := map[string]bool{}, map[string]bool{}
	for _, s := range waiting {
		if len(batch) == maxBatchSize || contacts[s.p.Contact.ID] || ids[s.p.HandoffID] {
			rest = append(rest, s)
			continue
		}
		contacts[s.p.Contact.ID], ids[s.p.HandoffID] = true, true
		batch = append(batch, s)
	}
	return batch, rest
}

// write writes a batch in one transaction and answers its submissions. A batch that fails as a
// whole (an id another instance took meanwhile, a deadlock, a lost connection) is written again
// one package at a time, so that only the package at fault gets the error.
func (in *Intake) write(batch []*submission) {
	// No request's goroutine runs the write (see Submit), so no handler would recover a panic:
	// the batch's packages are answered with it instead. It comes before any of them is answered,
	// since a write again in parts recovers its own.
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("writing a batch of packages panicked: %v\n%s", r, debug.Stack())
			for _, s := range batch {
				s.receipt, s.err = Receipt{}, err
				close(s.done)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	ctx, span := in.startBatch(ctx, batch)
	defer span.End()
	queued, due, err := in.writeRinging(ctx, batch)
	if err != nil && len(batch) > 1 {
		for _, s := range batch {
			in.write([]*submission{s})
		}
		return
	}
	if errors.Is(err, errIDTakenMeanwhile) {
		// The id's owner has committed, so reading again finds it and answers as any later request
		// would be answered: a replay, a conflict, or an id another key took.
		queued, due, err = in.writeRinging(ctx, batch)
	}
	if err != nil {
		batch[0].receipt, batch[0].err = Receipt{}, err
	}
	if queued {
		in.changed()
	}
	if !due.IsZero() {
		in.ringDue(due)
	}
	for _, s := range batch {
		close(s.done)
	}
}

// startBatch starts the span of a batch's transaction, under which its statements are traced. It
// links to the span of each package in it: a batch serves many requests, none its parent.
func (in *Intake) startBatch(ctx context.Context, batch []*submission) (context.Context, trace.Span) {
	if !in.tracing.On() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	var links []trace.Link
	for _, s := range batch {
		links = append(links, tracing.Link(s.trace, tracing.ToPackage)...)
	}
	return in.tracing.Start(ctx, "intake.batch", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("handoff.batch_size", len(batch))))
}

// writeRinging writes the batch deciding its warm packages' first rings. A batch that lost the
// race for an agent (errRingRaced) reads again: the agent another transaction rang meanwhile is
// busy now, and the next one is rung. Should that race be lost too, the batch's warm packages are
// written ringing nobody yet, and rung once committed as a replay is (actions.Ring).
func (in *Intake) writeRinging(ctx context.Context, batch []*submission) (bool, time.Time, error) {
	queued, due, err := in.writeBatch(ctx, batch, true)
	if errors.Is(err, errRingRaced) {
		queued, due, err = in.writeBatch(ctx, batch, true)
	}
	if errors.Is(err, errRingRaced) {
		queued, due, err = in.writeBatch(ctx, batch, false)
	}
	return queued, due, err
}

// writeBatch runs the batch's transaction on a connection of its own and reports whether it
// queued any package, and when the earliest ring or warm wait it started runs out (zero if
// none). ring decides the first ring of its warm packages; without it they are written ringing
// nobody yet. Every submission's answer is set afresh.
func (in *Intake) writeBatch(ctx context.Context, batch []*submission, ring bool) (bool, time.Time, error) {
	for _, s := range batch {
		s.receipt, s.err = Receipt{}, nil
	}
	conn, err := in.db.Acquire(ctx)
	if err != nil {
		return false, time.Time{}, err
	}
	defer conn.Release()
	queued, due, err := in.submit(ctx, conn.Conn(), batch, ring)
	if err != nil {
		// The connection may sit in an open or failed transaction. Should ROLLBACK fail too, the
		// pool sees the transaction still open on release and discards the connection.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return queued, due, err
}

// admission is a package that passed every check, and where it goes.
type admission struct {
	s            *submission
	id           int64
	queue        queue.Queue
	rank         int
	offeredTo    *int64
	offeredUntil *time.Time
	warmUntil    *time.Time // a warm package's end of ringing, while it rings or waits for an agent
	// A warm package's first ring: the agent it rings, from ringAt; or, when nobody of its queue
	// is online, its warm phase ends at once (warmEnded), at ringAt.
	rings     *queue.Ringable
	ringAt    time.Time
	warmEnded bool
}

// submit decides on every package of the batch and writes the admitted ones, in two round trips:
// one that begins, takes the contacts' locks and reads everything the decisions need, and one that
// writes and commits. Only a queue that overflows when nobody is online, a long handoff chain, a
// preferred agent or a replay of a waiting package costs more. A refusal answers its own package;
// any other error fails the batch, and the caller rolls back. It returns when the earliest ring
// or warm wait it started runs out.
func (in *Intake) submit(ctx context.Context, conn *pgx.Conn, batch []*submission, ring bool) (bool, time.Time, error) {
	now := in.now()
	s, err := readSituation(ctx, conn, batch, now, ring)
	if err != nil {
		return false, time.Time{}, err
	}
	// A ring starts once its package's row is written, on the desk's clock: after the reads,
	// which may have waited for the contacts' locks.
	s.ringAt = in.now()
	var admitted []admission
	for i, sub := range batch {
		a, err := in.decide(ctx, conn, s, i, sub, now)
		switch {
		case isRefusal(err):
			sub.err = err
		case err != nil:
			return false, time.Time{}, err
		case a != nil:
			admitted = append(admitted, *a)
		}
	}
	if len(admitted) == 0 {
		_, err := conn.Exec(ctx, "COMMIT")
		return false, time.Time{}, err
	}
	if err := writeAdmitted(ctx, conn, admitted, now); err != nil {
		var pgErr *pgconn.PgError
		switch {
		case len(batch) == 1 && errors.As(err, &pgErr) && pgErr.ConstraintName == "handoffs_handoff_id_key":
			return false, time.Time{}, errIDTakenMeanwhile
		case errors.As(err, &pgErr) && pgErr.ConstraintName == "offers_live_agent_idx":
			return false, time.Time{}, errRingRaced
		}
		return false, time.Time{}, err
	}
	var due time.Time
	for _, a := range admitted {
		at := a.warmUntil
		if a.rings != nil {
			at = a.offeredUntil
		}
		if at != nil && (due.IsZero() || at.Before(due)) {
			due = *at
		}
	}
	return true, due, nil
}

// errRingRaced is a batch whose ring of an agent found another ring of theirs, which another
// transaction made after the batch read them free.
var errRingRaced = errors.New("another transaction rang an agent this batch rang")

// errIDTakenMeanwhile is a package's id taken by another transaction between the package's read
// and its insert. Its message is for the rare bot that sees it: after a commit that took the id,
// write reads again and answers as for any id seen before.
var errIDTakenMeanwhile = desk.Errorf(desk.Conflict, "another request took this handoff_id at the same moment; send the package again")

// isRefusal tells an answer for one package (invalid, forbidden, refused by a guard or the
// overflow policy, a conflict) from a failure of the whole batch.
func isRefusal(err error) bool {
	var deskErr *desk.Error
	var invalid *handoff.ValidationError
	return errors.As(err, &deskErr) || errors.As(err, &invalid)
}

// decide applies the queue's rules to the i-th package of the batch. It sets the receipt of a
// replay and returns nil, or returns the admission of a new package.
func (in *Intake) decide(ctx context.Context, conn *pgx.Conn, s situation, i int, sub *submission, now time.Time) (*admission, error) {
	p := sub.p
	if r, ok := s.replays[p.HandoffID]; ok {
		if r.apiKeyID != sub.sender.APIKeyID {
			return nil, idTaken(p.HandoffID)
		}
		if !bytes.Equal(r.digest, sub.digest) {
			return nil, desk.Errorf(desk.Conflict, "handoff_id %q was already used with a different body", p.HandoffID)
		}
		sub.receipt = Receipt{HandoffID: p.HandoffID, Status: r.status, Queue: r.queue, Replayed: true}
		if r.status == handoff.StatusQueued {
			var err error
			sub.receipt.Position, err = position(ctx, conn, r.id)
			return nil, err
		}
		return nil, nil
	}
	q, ok := s.queues[p.TargetProfile]
	if !ok {
		return nil, &handoff.ValidationError{Fields: []handoff.FieldError{{
			Field: "target_profile", Rule: "queue", Message: fmt.Sprintf("no enabled queue is named %q", p.TargetProfile),
		}}}
	}
	if !sub.sender.allows(q.ID) {
		return nil, desk.Errorf(desk.Forbidden, "this API key may not send to queue %q", q.Name)
	}
	if err := p.ValidateForQueue(handoff.QueueRules{RequiredEntityKeys: q.RequiredEntityKeys}); err != nil {
		return nil, err
	}
	if err := s.guards[i].check(q, p, now); err != nil {
		return nil, err
	}
	escalated := false
	if len(p.HandoffChain) >= q.Guards.ChainLimit && q.EscalationQueueID != nil {
		escalation, err := queue.ByID(ctx, conn, *q.EscalationQueueID)
		if err != nil {
			return nil, err
		}
		q, escalated = escalation, true
	}
	// The policy of the queue the package would land in decides whether it may wait there.
	q, err := overflow(ctx, conn, q, now)
	if err != nil {
		return nil, err
	}
	priority := p.Priority
	if priority == "" {
		priority = handoff.Priority(q.DefaultPriority)
	}
	sub.receipt = Receipt{HandoffID: p.HandoffID, Status: handoff.StatusQueued, Queue: q.Name, Escalated: escalated}
	a := &admission{s: sub, id: s.ids[i], queue: q, rank: priority.Rank()}
	// A warm package rings its agents, its preferred agent first; a cold one gives its preferred
	// agent a head start.
	if p.TransferMode == handoff.TransferModeWarm {
		return a, in.ring(ctx, conn, s, a, now)
	}
	a.offeredTo, a.offeredUntil, err = offer(ctx, conn, q, p.PreferredAgent, now)
	return a, err
}

// ring decides a warm package's first ring as actions.Ring would once it is stored, by the same
// rule (queue.OrderRing), from its queue's members as the batch read them: it rings the first who
// may be rung and whom no package before it in the batch rings, or waits for one of them while
// they are busy, or, when nobody of the queue is online, ends its warm phase at once. The receipt
// says whom it rings, or the queue's estimated wait. Left undecided (s.ringable nil), the package
// rings nobody yet and actions.Ring rings it once committed.
func (in *Intake) ring(ctx context.Context, conn *pgx.Conn, s situation, a *admission, now time.Time) error {
	warmUntil := now.Add(a.queue.WarmWait)
	a.warmUntil = &warmUntil
	if s.ringable == nil {
		return nil
	}
	if _, read := s.waits[a.queue.ID]; !read {
		// Escalated or overflowed to a queue the batch did not read: its own reads, once.
		members, err := queue.RingableFor(ctx, conn, a.queue.Name, 0, nil)
		if err != nil {
			return err
		}
		wait, err := queue.EstimatedWait(ctx, conn, a.queue.ID)
		if err != nil {
			return err
		}
		s.ringable[a.queue.ID], s.waits[a.queue.ID] = members, wait
	}
	members := s.ringable[a.queue.ID]
	order := queue.OrderRing(members, a.s.p.PreferredAgent, false)
	for _, m := range order.Now {
		if s.rung[m.UserID] {
			continue
		}
		s.rung[m.UserID] = true
		// A ring never outlasts the warm wait, so waited_too_long comes on time.
		until := s.ringAt.Add(a.queue.AcceptWindow)
		if warmUntil.Before(until) {
			until = warmUntil
		}
		a.rings, a.ringAt, a.offeredTo, a.offeredUntil = &m, s.ringAt, &m.UserID, &until
		a.s.receipt.OfferedTo = m.Name
		return nil
	}
	if order.Left == 0 {
		a.warmUntil, a.warmEnded, a.ringAt = nil, true, s.ringAt
	}
	wait := int(s.waits[a.queue.ID].Round(time.Second).Seconds())
	a.s.receipt.EstimatedWaitSeconds = &wait
	return nil
}

// idTaken answers a handoff id that another key used first. Ids are unique across keys, so no
// package of this key can be stored under it, and the answer must not tell this key anything of
// the other package: not whose it is, where it waits or how it stands. It is a 422 on handoff_id,
// as a malformed id would get, rather than the 409 of an id this key sent with another body: that
// 409 means "you sent this id before", which this key never did, and a bot that takes it for
// "stored already" would then look for a package that is not there for it. The same request always
// gets the same 422, so a bot's retries stay safe, and it learns to mint a new id.
func idTaken(handoffID string) error {
	return &handoff.ValidationError{Fields: []handoff.FieldError{{
		Field: "handoff_id", Rule: "taken", Message: fmt.Sprintf("handoff_id %q is taken; send the package under a new id", handoffID),
	}}}
}

// writeAdmitted inserts the admitted packages with their events, audit rows and webhooks, reads
// each one's position and commits, in one round trip and one statement per table.
func writeAdmitted(ctx context.Context, conn *pgx.Conn, admitted []admission, now time.Time) error {
	n := len(admitted)
	var (
		ids, keys, queues = make([]int64, n), make([]int64, n), make([]int64, n)
		ranks             = make([]int16, n)
		handoffIDs        = make([]string, n)
		contacts, sources = make([]string, n), make([]string, n)
		packages          = make([]string, n)
		digests           = make([][]byte, n)
		expires           = make([]time.Time, n)
		offeredTo         = make([]*int64, n)
		offeredUntil      = make([]*time.Time, n)
		warmUntil         = make([]*time.Time, n)
		traces            = make([]*string, n)
		changes           = make([]events.Change, n)
	)
	for i, a := range admitted {
		p := a.s.p
		ids[i], keys[i], queues[i], ranks[i] = a.id, a.s.sender.APIKeyID, a.queue.ID, int16(a.rank) //nolint:gosec // G115: Priority.Rank is at most the number of priorities (4).
		handoffIDs[i], contacts[i], sources[i] = p.HandoffID, p.Contact.ID, p.SourceAgent
		packages[i], digests[i] = string(a.s.canonical), a.s.digest
		expires[i], offeredTo[i], offeredUntil[i], warmUntil[i] = now.Add(a.queue.TTL), a.offeredTo, a.offeredUntil, a.warmUntil
		traces[i] = a.s.trace
		changes[i] = events.Change{
			HandoffID: a.id, PublicID: p.HandoffID, QueueID: a.queue.ID, Queue: a.queue.Name, APIKeyID: a.s.sender.APIKeyID,
			Kind: events.Queued, Status: handoff.StatusQueued, ActorBot: &a.s.sender.APIKeyID, Reason: string(p.Trigger), At: now,
			Trace: a.s.trace, PackageTrace: a.s.trace,
		}
	}
	// The warm phase's start, after every package's queued: the ring, or the warm_timeout of a
	// package whose queue has nobody online, which its bot hears right after queued.
	var rung newOffers
	var rings []events.Change
	for i, a := range admitted {
		c := changes[i]
		c.ActorBot, c.Reason = nil, ""
		switch {
		case a.rings != nil:
			c.At = a.ringAt
			rings = append(rings, c.Rings(a.rings.UserID, a.rings.Name, *a.offeredUntil))
			rung.add(a)
		case a.warmEnded:
			// At the rings' time, not the package's: a bot orders its webhooks by occurred_at.
			c.Kind, c.Reason, c.At = events.WarmTimeout, handoff.WarmNoAgentOnline, a.ringAt
			changes = append(changes, c)
		}
	}
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO handoffs (id, handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent,
			package, body_sha256, created_at, enqueued_at, expires_at, updated_at, offered_to, offered_until, warm_until, trace_parent,
			repeat_contact)
		OVERRIDING SYSTEM VALUE
		SELECT id, handoff_id, api_key_id, queue_id, 'queued', priority_rank, contact_id, source_agent,
			package::json, body_sha256, $13, $13, expires_at, $13, offered_to, offered_until, warm_until, trace_parent,
			-- A repeat contact (docs/metrics.md): decided once, here, from closed rows, which stay closed.
			EXISTS (SELECT 1 FROM handoffs r WHERE r.contact_id = t.contact_id AND r.status IN ('resolved', 'returned_to_bot')
				AND r.closed_at < $13 AND r.closed_at >= $13 - interval '7 days')
		FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::smallint[], $6::text[], $7::text[],
			$8::text[], $9::bytea[], $10::timestamptz[], $11::bigint[], $12::timestamptz[], $14::timestamptz[], $15::text[])
			AS t(id, handoff_id, api_key_id, queue_id, priority_rank, contact_id, source_agent,
				package, body_sha256, expires_at, offered_to, offered_until, warm_until, trace_parent)`,
		ids, handoffIDs, keys, queues, ranks, contacts, sources, packages, digests, expires, offeredTo, offeredUntil, now, warmUntil, traces)
	rung.queue(b)
	if err := events.Queue(b, changes...); err != nil {
		return err
	}
	if err := events.QueueRings(b, rings...); err != nil {
		return err
	}
	// With the parameters in view the planner always finds a custom plan cheaper, and planning
	// the count costs PostgreSQL more than running it; the generic plan walks the queue's index
	// in claim order just the same.
	b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
	b.Queue(positionsQuery, queues, ranks, slices.Repeat([]time.Time{now}, n), ids, maxPosition).Query(func(rows pgx.Rows) error {
		i := 0
		for rows.Next() {
			if err := rows.Scan(&admitted[i].s.receipt.Position); err != nil {
				return err
			}
			i++
		}
		return rows.Err()
	})
	b.Queue("COMMIT")
	return conn.SendBatch(ctx, b).Close()
}

// newOffers are the offers of a batch's first rings, one per agent.
type newOffers struct {
	handoffs, agents []int64
	at, until        []time.Time
}

func (r *newOffers) add(a admission) {
	r.handoffs, r.agents = append(r.handoffs, a.id), append(r.agents, a.rings.UserID)
	r.at, r.until = append(r.at, a.ringAt), append(r.until, *a.offeredUntil)
}

// queue adds the offers to b, after their packages' rows. Their agents were free when the batch
// read them; another transaction that rang one of them since makes the insert fail on
// offers_live_agent_idx (errRingRaced), and the batch reads again. Ordered by agent, so that two
// batches ringing the same agents take their index entries in the same order and cannot deadlock.
//
// An insert that waited for another transaction's ring of the same agent to end (a ring made
// after the batch's read, and ended since) starts its ring after that end, as actions.Ring stamps
// its rings once written: the agent's rings never overlap in the log. The second statement, with
// a snapshot taken after the insert, moves such a ring (offered_at, until, the package's
// offered_until) past that end; it changes nothing otherwise.
func (r *newOffers) queue(b *pgx.Batch) {
	if len(r.agents) == 0 {
		return
	}
	b.Queue(`
		INSERT INTO offers (handoff_id, user_id, offered_at, until)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::timestamptz[]) ORDER BY 2`,
		r.handoffs, r.agents, r.at, r.until)
	b.Queue(`
		WITH late AS (
			SELECT o.id, o.handoff_id, prev.ended_at - o.offered_at AS shift
			FROM offers o CROSS JOIN LATERAL (
				SELECT p.ended_at FROM offers p WHERE p.user_id = o.user_id AND p.id <> o.id
				ORDER BY p.offered_at DESC LIMIT 1) prev
			WHERE o.handoff_id = ANY ($1::bigint[]) AND o.ended_at IS NULL AND prev.ended_at > o.offered_at),
		moved AS (
			UPDATE offers o SET offered_at = o.offered_at + late.shift, until = least(o.until + late.shift, h.warm_until)
			FROM late JOIN handoffs h ON h.id = late.handoff_id WHERE o.id = late.id
			RETURNING o.handoff_id, o.until)
		UPDATE handoffs h SET offered_until = moved.until FROM moved WHERE h.id = moved.handoff_id`, r.handoffs)
}

// situation is what intake reads before deciding on a batch: packages seen before (by handoff
// id), the target queues (by name), each package's guard counts and an id for each new row.
type situation struct {
	replays map[string]replay
	queues  map[string]queue.Queue
	guards  []guardCounts
	ids     []int64
	// For the warm packages' first rings: the ringable members and the estimated wait of their
	// queues (by id; ringable is nil when the batch does not decide rings), the agents the batch
	// rings, and when its rings start.
	ringable map[int64][]queue.Ringable
	waits    map[int64]time.Duration
	rung     map[int64]bool
	ringAt   time.Time
}

// replay is the stored package a handoff id was first used for.
type replay struct {
	id, apiKeyID int64
	status       handoff.Status
	queue        string
	digest       []byte
}

// guardCounts are the contact's recent handoffs as the guards need them. They count only packages in
// the queues the sender's key may use: a count or an open package from elsewhere would tell one bot
// about another bot's customers and ids.
type guardCounts struct {
	openID                              *string
	hourly, daily                       int
	oldestHourly, oldestDaily, lastPair *time.Time
}

// readSituation begins the transaction, takes the batch's contact locks and then reads, in the
// same round trip, everything the decisions need: with ring, that includes the ringable members
// and the estimated wait of the warm packages' queues. Statements of a batch run in order, so the
// reads see the data as of after the locks were granted. Every batch takes its locks in the order
// of their keys, so two batches sharing contacts cannot deadlock on them.
func readSituation(ctx context.Context, conn *pgx.Conn, batch []*submission, now time.Time, ring bool) (situation, error) {
	n := len(batch)
	s := situation{replays: map[string]replay{}, queues: map[string]queue.Queue{}, guards: make([]guardCounts, n)}
	handoffIDs, contacts, sources, targets := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	// The queues each package's key may use, as (package, queue) pairs: the guards count nothing
	// outside them.
	var scopeOf, scopeQueues []int64
	var warmTargets []string
	for i, sub := range batch {
		handoffIDs[i], contacts[i], sources[i], targets[i] = sub.p.HandoffID, sub.p.Contact.ID, sub.p.SourceAgent, sub.p.TargetProfile
		for _, q := range sub.sender.QueueIDs {
			scopeOf, scopeQueues = append(scopeOf, int64(i+1)), append(scopeQueues, q)
		}
		if sub.p.TransferMode == handoff.TransferModeWarm && !slices.Contains(warmTargets, sub.p.TargetProfile) {
			warmTargets = append(warmTargets, sub.p.TargetProfile)
		}
	}
	if ring {
		s.ringable, s.waits, s.rung = map[int64][]queue.Ringable{}, map[int64]time.Duration{}, map[int64]bool{}
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(`
		SELECT pg_advisory_xact_lock(key) FROM (
			SELECT hashtextextended('contact:' || contact, 0) AS key FROM unnest($1::text[]) AS contact
			ORDER BY key OFFSET 0) keys`, contacts)
	b.Queue(`
		SELECT h.handoff_id, h.id, h.api_key_id, h.status, q.name, h.body_sha256
		FROM handoffs h JOIN queues q ON q.id = h.queue_id
		WHERE h.handoff_id = ANY($1)`, handoffIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var handoffID string
			var r replay
			if err := rows.Scan(&handoffID, &r.id, &r.apiKeyID, &r.status, &r.queue, &r.digest); err != nil {
				return err
			}
			s.replays[handoffID] = r
		}
		return rows.Err()
	})
	queue.QueueEnabled(b, targets, func(q queue.Queue) { s.queues[q.Name] = q })
	b.Queue(`
		SELECT
			(SELECT handoff_id FROM handoffs
				WHERE contact_id = c.contact AND closed_at IS NULL AND queue_id = ANY(scope.queues) LIMIT 1),
			g.hourly, g.oldest_hourly, g.daily, g.oldest_daily, g.last_pair
		FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS c(contact, source, target, i)
		CROSS JOIN LATERAL (
			SELECT array_agg(s.queue_id) AS queues FROM unnest($5::bigint[], $6::bigint[]) AS s(i, queue_id)
			WHERE s.i = c.i) scope
		CROSS JOIN LATERAL (
			SELECT
				count(*) FILTER (WHERE h.created_at > $4::timestamptz - interval '1 hour') AS hourly,
				min(h.created_at) FILTER (WHERE h.created_at > $4::timestamptz - interval '1 hour') AS oldest_hourly,
				count(*) AS daily,
				min(h.created_at) AS oldest_daily,
				max(h.created_at) FILTER (WHERE h.source_agent = c.source AND h.queue_id = q.id
					AND h.created_at > $4::timestamptz - q.guard_pair_cooldown) AS last_pair
			FROM handoffs h LEFT JOIN queues q ON q.name = c.target
			WHERE h.contact_id = c.contact AND h.created_at > $4::timestamptz - interval '1 day'
				AND h.queue_id = ANY(scope.queues)) g
		ORDER BY c.i`,
		contacts, sources, targets, now, scopeOf, scopeQueues).Query(func(rows pgx.Rows) error {
		i := 0
		for rows.Next() {
			g := &s.guards[i]
			if err := rows.Scan(&g.openID, &g.hourly, &g.oldestHourly, &g.daily, &g.oldestDaily, &g.lastPair); err != nil {
				return err
			}
			i++
		}
		return rows.Err()
	})
	if ring && len(warmTargets) > 0 {
		// Planned afresh, the members' read (three views and five subqueries) costs PostgreSQL
		// ten times what running it does; the generic plan walks the same indexes whatever the
		// queues' names.
		b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
		queue.QueueRingable(b, warmTargets, func(members map[int64][]queue.Ringable) { s.ringable = members })
		queue.QueueEstimatedWaits(b, warmTargets, func(waits map[int64]time.Duration) { s.waits = waits })
		b.Queue("SET LOCAL plan_cache_mode TO DEFAULT")
	}
	// The sequence by the name the migration gives it: pg_get_serial_sequence would search the
	// catalog for it on every call.
	b.Queue(`SELECT nextval('handoffs_id_seq') FROM generate_series(1, $1)`, n).Query(func(rows pgx.Rows) error {
		var err error
		s.ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	err := conn.SendBatch(ctx, b).Close()
	return s, err
}

// check applies the target queue's guards to the contact's recent handoffs.
func (g guardCounts) check(q queue.Queue, p handoff.Package, now time.Time) error {
	switch {
	case q.Guards.OneOpen && g.openID != nil:
		return &desk.Error{
			Code: desk.Conflict, Reason: handoff.ReasonOpenHandoff, Details: map[string]string{"open_handoff_id": *g.openID},
			Message: fmt.Sprintf("contact %s already has handoff %s open: post the customer's messages to it (POST /api/v1/handoffs/%s/messages), or cancel it first",
				p.Contact.ID, *g.openID, *g.openID),
		}
	case g.hourly >= q.Guards.ContactHourly:
		return refused(handoff.ReasonContactHourly, g.oldestHourly.Add(time.Hour).Sub(now),
			"contact %s already had %d handoffs in the last hour (limit %d)", p.Contact.ID, g.hourly, q.Guards.ContactHourly)
	case g.daily >= q.Guards.ContactDaily:
		return refused(handoff.ReasonContactDaily, g.oldestDaily.Add(24*time.Hour).Sub(now),
			"contact %s already had %d handoffs in the last day (limit %d)", p.Contact.ID, g.daily, q.Guards.ContactDaily)
	case g.lastPair != nil:
		return refused(handoff.ReasonCircular, g.lastPair.Add(q.Guards.PairCooldown).Sub(now),
			"%s already handed contact %s to queue %s in the last %s; a customer who writes again after a resolve is no new handoff: post their message to that handoff (POST /api/v1/handoffs/{id}/messages), which reopens it within the queue's reopen window",
			p.SourceAgent, p.Contact.ID, q.Name, q.Guards.PairCooldown)
	}
	return nil
}

func refused(reason string, retryAfter time.Duration, format string, args ...any) error {
	return &desk.Error{Code: desk.RateLimited, Reason: reason, RetryAfter: max(retryAfter, time.Second), Message: fmt.Sprintf(format, args...)}
}

// maxPosition caps the position count: past it a bot learns only that the wait is long, and
// counting stays cheap however deep the queue grows.
const maxPosition = 100

// positionsQuery counts, for each package given as (queue, rank, enqueued_at, id), the waiting
// packages of its queue that "next" takes before it, walking the claim index and stopping at
// maxPosition. The count needs no order, but asking for the index's makes it the only good plan
// even when the parameters are unknown (a generic plan), where another index of queued packages
// would otherwise look as cheap.
const positionsQuery = `
	SELECT (
		SELECT count(*) FROM (
			SELECT 1 FROM handoffs h
			WHERE h.queue_id = t.queue_id AND h.status = 'queued'
				AND (h.priority_rank, h.enqueued_at, h.id) < (t.priority_rank, t.enqueued_at, t.id)
			ORDER BY h.priority_rank, h.enqueued_at, h.id
			LIMIT $5) ahead)
	FROM unnest($1::bigint[], $2::smallint[], $3::timestamptz[], $4::bigint[]) WITH ORDINALITY
		AS t(queue_id, priority_rank, enqueued_at, id, i)
	ORDER BY t.i`

// position is a package's place in its queue's claim order.
func position(ctx context.Context, db queue.Querier, id int64) (int, error) {
	var queueID int64
	var rank int16
	var enqueuedAt time.Time
	if err := db.QueryRow(ctx, `SELECT queue_id, priority_rank, enqueued_at FROM handoffs WHERE id = $1`, id).
		Scan(&queueID, &rank, &enqueuedAt); err != nil {
		return 0, err
	}
	var n int
	err := db.QueryRow(ctx, positionsQuery, []int64{queueID}, []int16{rank}, []time.Time{enqueuedAt}, []int64{id}, maxPosition).Scan(&n)
	return n, err
}

// AddQueueRules adds the errors of the queue a package names to the errors its decoding found,
// so that one answer lists every problem.
func (in *Intake) AddQueueRules(ctx context.Context, p handoff.Package, decodeErr error) error {
	if p.TargetProfile == "" {
		return decodeErr
	}
	q, err := queue.Enabled(ctx, in.db, p.TargetProfile)
	if err != nil {
		return decodeErr
	}
	return handoff.MergeErrors(decodeErr, p.ValidateForQueue(handoff.QueueRules{RequiredEntityKeys: q.RequiredEntityKeys}))
}

// Route picks the queue for a SW4RM request: to_agent when it names an enabled queue the sender
// may use; otherwise the sender's first queue (by name) whose skills cover every required
// capability.
func (in *Intake) Route(ctx context.Context, sender Sender, toAgent string, capabilities []string) (string, error) {
	name, err := queue.Route(ctx, in.db, sender.QueueIDs, toAgent, capabilities)
	if desk.ErrorCode(err) == desk.NotFound {
		return "", &handoff.ValidationError{Fields: []handoff.FieldError{{Field: "to_agent", Rule: "route",
			Message: fmt.Sprintf("no queue of this key is named %q or has the skills %v", toAgent, capabilities)}}}
	}
	return name, err
}
