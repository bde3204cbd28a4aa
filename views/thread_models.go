package views

import (
	"fmt"
	"time"
)

// Thread is the conversation as the package view shows it, like a chat: the transcript's last
// turns (the ones before folded away), then every message since the handoff, masked for the
// viewer. Messages arrive live as fragments of the list ThreadList names.
type Thread struct {
	ID string // the package's id
	// Earlier are the transcript's turns before Recent, folded; Recent its last few.
	Earlier, Recent []Turn
	// TranscriptWithheld: the queue withholds the transcript from the viewer's role.
	TranscriptWithheld bool
	PIIMasked          bool
	Messages           []ThreadMessage
}

// ThreadMessage is one message of the thread, its text masked for the viewer.
type ThreadMessage struct {
	Handoff string
	Seq     int
	Role    string // user, assistant or agent
	// Author is who wrote it: "Customer", "Bot", or the agent's name.
	Author      string
	Text        string
	At          time.Time
	Attachments []Attachment
	// HasDraft: the bot sent a draft of the answer with this customer message.
	HasDraft bool
	// How and Tags are, on an agent's reply, how it came about (the draft as is, edited, from
	// scratch) and why the agent changed the draft.
	How  string
	Tags []string
	// Delivery is, on an agent's reply, where its webhook to the bot stands.
	Delivery *Delivery
}

// Attachment is a link the customer sent, with its name and size in words.
type Attachment struct {
	Name string
	Href string // "" when masking changed the link: it shows as text
	Size string
}

// Delivery is where a reply's webhook stands. State is queued, sending, retrying, delivered,
// failed or not_sent; Words says it for the agent, with the time, the attempt and the error.
type Delivery struct {
	State string
	Words string
}

// DraftOffer is the bot's draft of the answer to a customer message, offered to the agent who
// writes the reply: never put in the composer for them, as it may hold what they typed.
type DraftOffer struct {
	Handoff string
	Seq     int
	// Text is the draft with tokens where the agent may not see a value, as the composer takes it.
	Text string
	// Stale: the customer wrote again since, or an agent answered: the draft is for an older turn.
	Stale bool
}

// ThreadList is the id of the thread's message list, where the socket puts new messages.
func ThreadList(id string) string { return "thread-messages-" + id }

// MessageID is the element id of message seq of package id.
func MessageID(id string, seq int) string { return fmt.Sprintf("msg-%s-%d", id, seq) }

// MessageSort orders messages in their list by seq (the socket's upsert compares text).
func MessageSort(seq int) string { return fmt.Sprintf("%010d", seq) }

// Announce is what the thread's live region says of a message arriving: who wrote, and what.
func (m ThreadMessage) Announce() string { return m.Author + " wrote: " + m.Text }

// DraftOfferID is the element id of a package's draft offer.
func DraftOfferID(id string) string { return "draft-offer-" + id }
