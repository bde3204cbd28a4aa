package views

// FormField is one field of an admin form: the same component renders a queue setting, a user's
// role or a key's webhook URL, with its help line and, after a refused submit, its complaint.
type FormField struct {
	Name  string
	Label string
	Help  string
	// Input is text, email, password, number, duration, list, select, choices (checkboxes) or
	// checkbox.
	Input    string
	Value    string
	Selected []string // of choices
	Options  []Option
	Error    string
	ReadOnly bool
}

// Option is one choice of a select or of checkboxes.
type Option struct {
	Value string
	Label string
}

// AdminForm is a form of the console: where it posts, its fields, and what went wrong as a whole.
type AdminForm struct {
	Action string
	Submit string
	TestID string
	Fields []FormField
	Error  string // a refusal that is no one field's
}

// AdminQueueRow is one queue of the tree.
type AdminQueueRow struct {
	ID      string
	Name    string
	Depth   int
	Enabled bool
	Members int
	PIIRole string
}

// AdminQueuesView is /admin/queues: the tree and the form for a new queue.
type AdminQueuesView struct {
	Viewer Viewer
	Queues []AdminQueueRow
	Form   AdminForm
}

// AdminQueueView is one queue's page: its settings, who works it, and turning it off or on.
type AdminQueueView struct {
	Viewer  Viewer
	Name    string
	Enabled bool
	Form    AdminForm
	Members []Option // user id → email
	// AddMember adds a person to the queue; each member has a button that takes them off it.
	AddMember    AdminForm
	RemoveAction string // the members' remove actions start with this, then the user id
	// Disable is the form that turns the queue off, offering where to move its open packages.
	Disable AdminForm
	Enable  string // the action that turns it back on, when it is off
	// SavedReplies are the queue's saved replies, each with a button that removes it
	// (RemoveSavedAction, then its id), and AddSavedReply the form for a new one.
	SavedReplies      []SavedReply
	AddSavedReply     AdminForm
	RemoveSavedAction string
}

// SavedReply is a queue's saved reply: its title, and its text with the editor's tokens. In the
// editor, Text has the tokens filled where the agent may see the values.
type SavedReply struct {
	ID    string
	Title string
	Text  string
}

// AdminUserRow is one person in the list.
type AdminUserRow struct {
	ID       string
	Email    string
	Name     string
	Role     string
	Queues   string
	Capacity int
	Status   string // active, disabled, must change password
	LastSeen string // online now, or their last login
}

// AdminUsersView is /admin/users.
type AdminUsersView struct {
	Viewer Viewer
	Users  []AdminUserRow
	Form   AdminForm
}

// AdminUserView is one person's page.
type AdminUserView struct {
	Viewer   Viewer
	ID       string
	Email    string
	Disabled bool
	SSOOnly  bool // their password login is off
	Form     AdminForm
	Error    string // a refused disable, enable or reset
}

// SecretView shows what is shown once: a temporary password, or a new key and its signing secret.
type SecretView struct {
	Viewer  Viewer
	Title   string
	Note    string
	Secrets []Option // label → value
	Back    string
}

// AdminKeyRow is one bot key in the list.
type AdminKeyRow struct {
	ID         string
	Name       string
	Prefix     string
	Queues     string
	WebhookURL string
	Created    string
	LastUsed   string
	Revoked    bool
}

// AdminKeysView is /admin/keys.
type AdminKeysView struct {
	Viewer Viewer
	Keys   []AdminKeyRow
	Form   AdminForm
}

// AdminDelivery is one webhook delivery of a key.
type AdminDelivery struct {
	ID            string
	Event         string
	HandoffID     string
	State         string
	Attempts      int
	LastStatus    string
	LastError     string
	NextAttempt   string
	Created       string
	Redeliverable bool
}

// AdminKeyView is one key's page: its queues and webhook URL, and its deliveries newest first.
type AdminKeyView struct {
	Viewer  Viewer
	ID      string
	Name    string
	Prefix  string
	Revoked bool
	Form    AdminForm
	Rotate  AdminForm // a new signing secret, the old one signing beside it for the overlap
	// PreviousUntil is when the secret the last rotation replaced stops signing, while it still does.
	PreviousUntil string
	Deliveries    []AdminDelivery
	Older         string // the next page's address, when there may be one
}

// PasswordView is the form to choose a new password.
type PasswordView struct {
	Viewer Viewer
	Forced bool // the password was reset: nothing else opens until it is changed
	Form   AdminForm
}

// AdminSettingsView is the desk's own settings: single sign-on's.
type AdminSettingsView struct {
	Viewer Viewer
	// SSOConfigured says whether this instance has an identity provider (OIDC_ISSUER): the
	// settings apply only once it has.
	SSOConfigured bool
	SSO           AdminForm
}

// ConfirmView asks an admin to confirm an action that acts on others at once, saying what it
// will do. Its form posts the action again with confirm=yes.
type ConfirmView struct {
	Viewer       Viewer
	Tab          string // the console's tab it belongs to
	Title        string
	Consequences []string
	Action       string
	Submit       string
	Cancel       string // where "cancel" goes back to
	TestID       string
}
