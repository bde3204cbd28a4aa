package server

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/webhook"
	"github.com/handoffdesk/desk/views"
)

// recentTurns is how many of the transcript's last turns the thread shows before the messages
// since the handoff; the earlier ones are folded away.
const recentTurns = 3

// threadOf is the conversation of item as user sees it: the transcript's last turns, then the
// thread, masked; and what of it they see unmasked, for the record of PII reads.
func threadOf(item board.Item, user auth.User, msgs []conversation.Message, replies []evals.SentReply, deliveries map[string]webhook.Delivery) (views.Thread, []string) {
	vis := visibility(user, item)
	p := item.Package.MaskFor(vis)
	t := views.Thread{ID: item.PublicID, TranscriptWithheld: vis.WithholdTranscript, PIIMasked: !vis.PII}
	for i, turn := range p.Transcript {
		v := views.Turn{Role: string(turn.Role), Content: turn.Content, At: formatTime(turn.At)}
		if i < len(p.Transcript)-recentTurns {
			t.Earlier = append(t.Earlier, v)
		} else {
			t.Recent = append(t.Recent, v)
		}
	}
	t.Messages = messagesOf(item, vis, msgs, replies, deliveries)
	return t, threadUnmasked(item, vis, msgs)
}

// threadUnmasked says whether the messages show vis's viewer a value a viewer below the queue's
// PII role would see masked: "messages", or nothing.
func threadUnmasked(item board.Item, vis handoff.Visibility, msgs []conversation.Message) []string {
	if !vis.PII {
		return nil
	}
	masked := conversation.MaskFor(msgs, item.Package, handoff.Visibility{PIIEntityKeys: vis.PIIEntityKeys})
	for i := range msgs {
		if masked[i].Text != msgs[i].Text {
			return []string{"messages"}
		}
	}
	return nil
}

// messagesOf maps messages of item's thread to the view, masked for vis: the customer's and the
// bot's as notes are (conversation.MaskFor); an agent's reply as texts people wrote are
// (handoff.WrittenMaskFor): for a viewer who may not see a value, the reply of an agent who could
// not either reads as they submitted it, and one who could's with the tokens the editor showed. A reply carries how it came about
// (matched to its eval record, written in the same transaction at the same time) and its delivery.
func messagesOf(item board.Item, vis handoff.Visibility, msgs []conversation.Message, replies []evals.SentReply, deliveries map[string]webhook.Delivery) []views.ThreadMessage {
	masked := conversation.MaskFor(msgs, item.Package, vis)
	out := make([]views.ThreadMessage, 0, len(msgs))
	for i, m := range masked {
		v := views.ThreadMessage{Handoff: item.PublicID, Seq: m.Seq, Role: string(m.Role), Text: m.Text, At: m.At,
			HasDraft: m.DraftReply != ""}
		switch m.Role {
		case conversation.User:
			v.Author = "Customer"
		case conversation.Assistant:
			v.Author = "Bot"
		case conversation.Agent:
			v.Author, v.Text = m.Author, replyText(item.Package, vis, msgs[i].Text, msgs[i].AsWritten)
			if j := slices.IndexFunc(replies, func(r evals.SentReply) bool { return r.At.Equal(m.At) }); j >= 0 {
				v.How, v.Tags = replyHow(replies[j]), replies[j].Tags
			}
			d := deliveryOf(deliveries[m.MessageID])
			v.Delivery = &d
		}
		for j, a := range m.Attachments {
			att := views.Attachment{Name: a.Name, Size: sizeWords(a.Size)}
			if att.Name == "" {
				att.Name = "attachment"
			}
			// A link masking changed would lead somewhere else: it shows as text.
			if a.URL == msgs[i].Attachments[j].URL {
				att.Href = httpsLink(a.URL)
			}
			v.Attachments = append(v.Attachments, att)
		}
		out = append(out, v)
	}
	return out
}

// replyText is a reply sent on p as vis reads it, from its text as sent and its text as an author
// who could not see the contact's values submitted it ("": one who could). To a viewer who cannot
// see them either, such an author's reply reads as submitted: its right guess of a value reads as
// typed, as a wrong one does, where turning the values back into tokens would tell them apart.
func replyText(p handoff.Package, vis handoff.Visibility, sent, asWritten string) string {
	if !vis.PII && asWritten != "" {
		return asWritten
	}
	return p.ReplyFor(vis, sent)
}

// replyHow says how a reply came about.
func replyHow(r evals.SentReply) string {
	switch {
	case r.FromScratch:
		return "written from scratch"
	case r.AcceptedAsIs:
		return "draft sent as is"
	}
	return "edited the draft"
}

// httpsLink is u when it is an https link, the only kind the API takes, else "".
func httpsLink(u string) string {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Scheme != "https" {
		return ""
	}
	return u
}

// sizeWords says an attachment's size as people read it.
func sizeWords(size *int64) string {
	if size == nil {
		return ""
	}
	n := float64(*size)
	for _, unit := range []string{"bytes", "KB", "MB", "GB"} {
		if n < 1024 || unit == "GB" {
			if unit == "bytes" {
				return fmt.Sprintf("%d bytes", *size)
			}
			return fmt.Sprintf("%.1f %s", n, unit)
		}
		n /= 1024
	}
	return ""
}

// deliveryOf says where a reply's webhook stands. The customer has the reply only once the bot
// took it: until then the page says it is on its way, and why it is late.
func deliveryOf(d webhook.Delivery) views.Delivery {
	switch {
	case d.ID == 0:
		// The reply and its outbox row commit together: a reply without one predates the thread.
		return views.Delivery{State: "queued", Words: "Queued for the bot."}
	case d.State == webhook.StateDelivered && d.DeliveredAt != nil:
		return views.Delivery{State: "delivered", Words: "Sent to the customer: the bot took it at " + clock(*d.DeliveredAt) + "."}
	case d.State == webhook.StateNoEndpoint:
		return views.Delivery{State: "not_sent", Words: "Not sent: the bot's key has no webhook URL, so the bot reads replies with GET …/messages."}
	case d.State == webhook.StateDead:
		return views.Delivery{State: "failed", Words: fmt.Sprintf("Failed: the bot did not take it after %d attempts (%s). An admin can send it again from the bot's deliveries.", d.Attempts, deliveryError(d))}
	case d.LastStatus != 0 || d.LastError != "":
		return views.Delivery{State: "retrying", Words: fmt.Sprintf("Retrying: attempt %d failed (%s); next try at %s.", d.Attempts, deliveryError(d), clock(d.NextAttemptAt))}
	case d.Attempts > 0:
		return views.Delivery{State: "sending", Words: "Sending to the bot…"}
	}
	return views.Delivery{State: "queued", Words: "Queued for the bot."}
}

// deliveryError says in words why the last attempt failed.
func deliveryError(d webhook.Delivery) string {
	if d.LastStatus != 0 {
		return fmt.Sprintf("the bot answered HTTP %d", d.LastStatus)
	}
	if d.LastError != "" {
		return "no answer: " + d.LastError
	}
	return "no answer"
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05") + " UTC" }

// draftOffer is the bot's draft for the customer's latest turn that came with one, with tokens
// where vis may not see a value, as the composer takes it; stale once the customer wrote again
// without one, or an agent answered since.
func draftOffer(item board.Item, vis handoff.Visibility, msgs []conversation.Message) *views.DraftOffer {
	var offer *views.DraftOffer
	for _, m := range msgs {
		switch {
		case m.Role == conversation.User && m.DraftReply != "":
			p := item.Package
			p.DraftReply = m.DraftReply
			offer = &views.DraftOffer{Handoff: item.PublicID, Seq: m.Seq, Text: p.DraftFor(vis).Text}
		case offer != nil && (m.Role == conversation.User || m.Role == conversation.Agent):
			offer.Stale = true
		}
	}
	return offer
}

// threadKinds are the events that add to a package's thread.
func addsToThread(k events.Kind) bool {
	return k == events.Message || k == events.Reply || k == events.Reopened
}

// threadFragments are the messages a batch added to the thread of w's package, each put in its
// place in the list by seq, and the composer's draft offer anew: what a message moves on the page,
// rather than the whole package view. evs are the batch's events of the package. What it reads
// names no viewer, so every socket showing the package shares one read per batch (shared); only
// the masking and the offer are each viewer's.
func (s *Server) threadFragments(ctx context.Context, w watcher, item board.Item, evs []events.Event, shared *live.Shared) ([]fragment, []string, error) {
	var since time.Time
	for _, e := range evs {
		if addsToThread(e.Kind) && (since.IsZero() || e.At.Before(since)) {
			since = e.At
		}
	}
	delivered := slices.ContainsFunc(evs, func(e events.Event) bool { return e.Kind == events.ReplyDelivery })
	if since.IsZero() && !delivered {
		return nil, nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	var frags []fragment
	if delivered {
		states, err := memo(shared, deliveriesKey(item.ID), func() ([]fragment, error) { return s.deliveryFragments(ctx, item) })
		if err != nil {
			return nil, nil, err
		}
		frags = slices.Clone(states)
	}
	if since.IsZero() {
		return frags, nil, nil
	}
	r, err := memo(shared, threadKey{item.ID, since}, func() (threadRead, error) { return s.readThread(ctx, item, since) })
	if err != nil {
		return nil, nil, err
	}
	added := r.all[len(r.all)-r.added:]
	vis := visibility(w.user, item)
	for _, m := range messagesOf(item, vis, added, r.replies, r.deliveries) {
		f, err := rendered(ctx, fragment{Target: views.MessageID(m.Handoff, m.Seq), Op: "upsert", List: views.ThreadList(item.PublicID),
			Sort: views.MessageSort(m.Seq)}, views.ThreadMessageItem(m))
		if err != nil {
			return nil, nil, err
		}
		frags = append(frags, f)
	}
	if item.HeldBy(w.user.ID) {
		// The offer follows the whole thread: a message without a draft makes the last one stale.
		f, err := rendered(ctx, fragment{Target: views.DraftOfferID(item.PublicID), Op: "replace"},
			views.DraftOfferSlot(item.PublicID, draftOffer(item, vis, r.all)))
		if err != nil {
			return nil, nil, err
		}
		frags = append(frags, f)
	}
	return frags, threadUnmasked(item, vis, added), nil
}

// deliveriesKey and threadKey name a package's reads that a batch's sockets share.
type (
	deliveriesKey int64
	threadKey     struct {
		handoff int64
		since   time.Time
	}
)

// threadRead is a package's thread as a batch found it: the whole of it, how many of its last
// messages the batch added, and for added replies their records and delivery states.
type threadRead struct {
	all        []conversation.Message
	added      int
	replies    []evals.SentReply
	deliveries map[string]webhook.Delivery
}

func (s *Server) readThread(ctx context.Context, item board.Item, since time.Time) (threadRead, error) {
	var r threadRead
	var err error
	if r.all, r.added, err = conversation.ReadMarking(ctx, s.db, item.ID, since); err != nil {
		return r, err
	}
	added := r.all[len(r.all)-r.added:]
	if slices.ContainsFunc(added, func(m conversation.Message) bool { return m.Role == conversation.Agent }) {
		if r.replies, err = evals.Replies(ctx, s.db, item.ID); err != nil {
			return r, err
		}
		if r.deliveries, err = webhook.ReplyDeliveries(ctx, s.db, item.PublicID); err != nil {
			return r, err
		}
	}
	return r, nil
}

// deliveryFragments are the delivery states of item's replies, read anew: the deliverer moved one.
// They name no one, so every viewer gets the same.
func (s *Server) deliveryFragments(ctx context.Context, item board.Item) ([]fragment, error) {
	msgs, err := conversation.Read(ctx, s.db, item.ID, 0)
	if err != nil {
		return nil, err
	}
	deliveries, err := webhook.ReplyDeliveries(ctx, s.db, item.PublicID)
	if err != nil {
		return nil, err
	}
	var frags []fragment
	for _, m := range msgs {
		if m.Role != conversation.Agent {
			continue
		}
		f, err := rendered(ctx, fragment{Target: "delivery-" + views.MessageID(item.PublicID, m.Seq), Op: "replace"},
			views.DeliveryState(item.PublicID, m.Seq, deliveryOf(deliveries[m.MessageID])))
		if err != nil {
			return nil, err
		}
		frags = append(frags, f)
	}
	return frags, nil
}
