package handoff

// HandBack is what an agent hands the conversation back to the bot with, when they return or
// resolve a package (SPEC §2a): what the bot needs to carry on with facts, not a stale promise.
// The agent's parts are optional; the desk adds where the thread stood.
type HandBack struct {
	// Done is what the agent resolved or did, in one line.
	Done string `json:"done,omitempty"`
	// Confirmed are the keys of the package's structured_entities the agent checked and found
	// right. Only the keys: a value the agent may have seen masked is never echoed.
	Confirmed []string `json:"confirmed,omitempty"`
	// Corrected maps keys of the package's structured_entities to the right value, as the agent
	// typed it.
	Corrected map[string]string `json:"corrected,omitempty"`
	// Instruction is what the bot must do from here, e.g. "do not escalate again for this charge;
	// the refund is done".
	Instruction string `json:"instruction,omitempty"`

	// LastSeq is the seq of the thread's last message when the package closed (0: no message).
	LastSeq int `json:"last_seq"`
	// Thread is the link to the thread (BASE_URL and its path), to GET with the bot's key.
	Thread string `json:"thread"`
	// LastReply is the agent's last reply in the thread: what the customer was told last.
	LastReply *LastReply `json:"last_reply,omitempty"`
}

// LastReply is the agent's last message of a thread.
type LastReply struct {
	Seq  int    `json:"seq"`
	Text string `json:"text"`
}

// Hand-back limits, in characters.
const (
	MaxHandBackDone        = 300
	MaxHandBackInstruction = 1000
	MaxHandBackValue       = 500
)
