package sw4rm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/handoffdesk/desk/internal/handoff"
)

// metadataField is a package field that a metadata entry fills.
type metadataField struct {
	path string // in the package, for errors
	// set stores v, or returns a message completing "metadata.KEY " when v is unusable.
	set func(p *handoff.Package, v string) string
}

// metadataFields maps the metadata keys the desk understands. The rest become
// structured entities, as they are facts the bot established, like account_id.
var metadataFields = map[string]metadataField{
	"contact_id":            {"contact.id", func(p *handoff.Package, v string) string { p.Contact.ID = v; return "" }},
	"contact_name":          {"contact.display_name", func(p *handoff.Package, v string) string { p.Contact.DisplayName = v; return "" }},
	"contact_email":         {"contact.email", func(p *handoff.Package, v string) string { p.Contact.Email = v; return "" }},
	"contact_phone":         {"contact.phone", func(p *handoff.Package, v string) string { p.Contact.Phone = v; return "" }},
	"user_verified":         {"user_verified", setUserVerified},
	"trigger":               {"trigger", setTrigger},
	"priority":              {"priority", func(p *handoff.Package, v string) string { p.Priority = handoff.Priority(v); return "" }},
	"sentiment":             {"sentiment", func(p *handoff.Package, v string) string { p.Sentiment = handoff.Sentiment(v); return "" }},
	"locale":                {"locale", func(p *handoff.Package, v string) string { p.Locale = v; return "" }},
	"channel_origin":        {"channel_origin", func(p *handoff.Package, v string) string { p.ChannelOrigin = handoff.Channel(v); return "" }},
	"channel_target":        {"channel_target", func(p *handoff.Package, v string) string { p.ChannelTarget = handoff.Channel(v); return "" }},
	"problem_statement":     {"problem_statement", func(p *handoff.Package, v string) string { p.ProblemStatement = v; return "" }},
	"recommended_next_step": {"recommended_next_step", func(p *handoff.Package, v string) string { p.RecommendedNextStep = v; return "" }},
	"draft_reply":           {"draft_reply", func(p *handoff.Package, v string) string { p.DraftReply = v; return "" }},
	"preferred_agent":       {"preferred_agent", func(p *handoff.Package, v string) string { p.PreferredAgent = v; return "" }},
	"run_id":                {"source_run_id", func(p *handoff.Package, v string) string { p.SourceRunID = v; return "" }},
	"refund_amount":         {"refund.amount", func(p *handoff.Package, v string) string { refundOf(p).Amount = v; return "" }},
	"refund_currency":       {"refund.currency", func(p *handoff.Package, v string) string { refundOf(p).Currency = v; return "" }},
}

func setUserVerified(p *handoff.Package, v string) string {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return `must be "true" or "false"`
	}
	p.UserVerified = b
	return ""
}

// setTrigger keeps a valid trigger only: an unknown one is the sender's own
// vocabulary, and the conversion derives a trigger instead.
func setTrigger(p *handoff.Package, v string) string {
	if slices.Contains(handoff.Triggers(), handoff.Trigger(v)) {
		p.Trigger = handoff.Trigger(v)
	}
	return ""
}

func refundOf(p *handoff.Package) *handoff.Refund {
	if p.Refund == nil {
		p.Refund = &handoff.Refund{}
	}
	return p.Refund
}

// roles maps the role spellings of common LLM APIs to transcript roles.
var roles = map[string]handoff.Role{
	"user": handoff.RoleUser, "human": handoff.RoleUser, "customer": handoff.RoleUser,
	"assistant": handoff.RoleAssistant, "ai": handoff.RoleAssistant, "agent": handoff.RoleAssistant, "bot": handoff.RoleAssistant, "model": handoff.RoleAssistant,
	"tool": handoff.RoleTool, "function": handoff.RoleTool,
	"system": handoff.RoleSystem, "developer": handoff.RoleSystem,
}

// conversion builds a package from a request and remembers, for each package
// field it filled, the request field it came from, so that errors name what
// the sender wrote.
type conversion struct {
	p    handoff.Package
	from map[string]string    // package path → request path
	errs []handoff.FieldError // already in request paths
}

// sourced is an item of a list the conversion trims, with its request path.
type sourced[T any] struct {
	v    T
	from string
}

func (r Request) convert(ctx Context, queue string) (handoff.Package, []handoff.FieldError) {
	c := conversion{from: map[string]string{
		"source_agent":        "from_agent",
		"reason":              "reason",
		"structured_entities": "metadata",
	}}
	// Errors about a field that metadata fills, present or not (a missing
	// contact), name the metadata key.
	for key, field := range metadataFields {
		c.from[field.path] = "metadata." + key
	}
	c.p = handoff.Package{
		SchemaVersion: schemaVersion,
		SourceAgent:   r.FromAgent,
		TargetProfile: queue,
		TransferMode:  handoff.TransferModeCold,
		Reason:        r.Reason,
	}
	if r.PreserveHistory {
		c.p.TransferMode = handoff.TransferModeWarm
	}
	c.requestRules(r)
	c.handoffID(r, ctx)
	c.metadata(r.Metadata)
	c.contactID(r.Metadata)

	if c.p.Trigger == "" {
		c.p.Trigger = handoff.TriggerUserRequest
		if len(r.CapabilitiesRequired) > 0 {
			c.p.Trigger = handoff.TriggerCapabilityMismatch
		}
	}
	if strings.TrimSpace(c.p.ProblemStatement) == "" {
		c.p.ProblemStatement = r.Reason
		c.from["problem_statement"] = "reason"
	}
	c.p.ProblemStatement = firstParagraph(c.p.ProblemStatement, maxSummary)
	if c.p.SourceRunID == "" {
		c.p.SourceRunID = c.p.HandoffID
		delete(c.from, "source_run_id")
		if from, ok := c.from["handoff_id"]; ok {
			c.from["source_run_id"] = from
		}
	}
	if r.PreserveHistory {
		c.transcript(ctx.ConversationHistory)
	}
	c.toolState(ctx.ToolState)

	errs := c.errs
	if verr, ok := errors.AsType[*handoff.ValidationError](c.p.Validate()); ok {
		for _, fe := range verr.Fields {
			errs = append(errs, c.translate(fe))
		}
	}
	return c.p, errs
}

func tooLong(path string, n int) handoff.FieldError {
	return handoff.FieldError{Field: path, Rule: handoff.RuleMax, Message: fmt.Sprintf("%s must be at most %d characters", path, n)}
}

// requestRules checks the fields that route the request rather than fill the package.
func (c *conversion) requestRules(r Request) {
	if utf8.RuneCountInString(r.ToAgent) > 128 {
		c.errs = append(c.errs, tooLong("to_agent", 128))
	}
	if len(r.CapabilitiesRequired) > maxCapabilities {
		c.errs = append(c.errs, handoff.FieldError{Field: "capabilities_required", Rule: handoff.RuleMax,
			Message: fmt.Sprintf("capabilities_required must have at most %d items", maxCapabilities)})
	}
	for i, capability := range r.CapabilitiesRequired {
		path := fmt.Sprintf("capabilities_required[%d]", i)
		if strings.TrimSpace(capability) == "" {
			c.errs = append(c.errs, handoff.FieldError{Field: path, Rule: "notblank", Message: path + " must not be blank"})
		} else if utf8.RuneCountInString(capability) > 128 {
			c.errs = append(c.errs, tooLong(path, 128))
		}
	}
	if r.Timeout < 0 {
		c.errs = append(c.errs, handoff.FieldError{Field: "timeout", Rule: "min", Message: "timeout must not be negative"})
	}
}

// handoffID takes the sender's request id, or derives one from the request's
// content: a retry of the same request then gets the same id, and the desk
// answers it as a replay instead of queueing the customer twice. The content
// is hashed as decoded, so whitespace, member order and the choice between a
// base64 and an inline context do not change the id.
func (c *conversion) handoffID(r Request, ctx Context) {
	if r.RequestID != "" {
		c.p.HandoffID = r.RequestID
		c.from["handoff_id"] = "request_id"
		return
	}
	content, err := json.Marshal(struct {
		Request Request `json:"request"`
		Context Context `json:"context"`
	}{r, ctx})
	if err != nil { // only for a ToolState built in Go from values JSON cannot hold
		c.errs = append(c.errs, handoff.FieldError{Field: "context_snapshot.tool_state", Rule: handoff.RuleType,
			Message: "context_snapshot.tool_state must hold JSON values only: " + err.Error()})
		return
	}
	sum := sha256.Sum256(content)
	c.p.HandoffID = "sw4rm_" + hex.EncodeToString(sum[:16])
}

// contactIDFrom are the metadata keys a contact id is taken from when contact_id is not given,
// in this order: SW4RM has no contact, and its own example request names none.
var contactIDFrom = []string{"customer_id", "user_id", "conversation_id", "session_id"}

// contactID gives the package a contact when the sender named none: the first of contactIDFrom
// the metadata holds, or one made from the handoff's id. A made one never matches another
// handoff's, so the desk's per-contact rules (one open handoff, the hourly limit, repeat
// contacts) see each such request as a new customer.
func (c *conversion) contactID(md map[string]string) {
	if c.p.Contact.ID != "" {
		return
	}
	for _, key := range contactIDFrom {
		if v := strings.TrimSpace(md[key]); v != "" {
			c.p.Contact.ID = v
			c.from["contact.id"] = "metadata." + key
			return
		}
	}
	if c.p.HandoffID != "" {
		c.p.Contact.ID = "anon_" + c.p.HandoffID
		c.from["contact.id"] = c.from["handoff_id"]
	}
}

func (c *conversion) metadata(md map[string]string) {
	for _, key := range slices.Sorted(maps.Keys(md)) {
		v, path := scrubText(md[key]), "metadata."+key
		field, known := metadataFields[key]
		switch {
		case secret(key):
			// A credential is no fact for a human or for training data: it is not kept.
		case known:
			if problem := field.set(&c.p, v); problem != "" {
				c.errs = append(c.errs, handoff.FieldError{Field: path, Rule: handoff.RuleType, Message: path + " " + problem})
			}
		case strings.TrimSpace(v) != "":
			c.entity(key, handoff.StringEntity(v), path)
		}
	}
}

func (c *conversion) entity(key string, v handoff.EntityValue, from string) {
	if c.p.StructuredEntities == nil {
		c.p.StructuredEntities = map[string]handoff.EntityValue{}
	}
	c.p.StructuredEntities[key] = v
	c.from["structured_entities."+key] = from
}

func (c *conversion) transcript(history []Message) {
	const path = "context_snapshot.conversation_history"
	var turns []sourced[handoff.Turn]
	for i, m := range history {
		from := fmt.Sprintf("%s[%d]", path, i)
		role, ok := roles[strings.ToLower(m.Role)]
		if !ok {
			c.errs = append(c.errs, roleError(from+".role", m.Role))
			continue
		}
		// Messages that only call tools have no text for a human to read.
		if strings.TrimSpace(m.Content) == "" {
			continue
		}
		turns = append(turns, sourced[handoff.Turn]{handoff.Turn{Role: role, Content: truncateText(m.Content, maxTurnContent), At: inUTC(m.At)}, from})
	}
	c.p.Transcript = keepLast(turns, maxTurns, "transcript", c.from)
}

// inUTC keeps the instant and drops the sender's offset, as handoff.Decode
// does.
func inUTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	utc := t.UTC()
	return &utc
}

func roleError(path, role string) handoff.FieldError {
	if role == "" {
		return handoff.FieldError{Field: path, Rule: handoff.RuleRequired, Message: path + " is required"}
	}
	return handoff.FieldError{Field: path, Rule: "oneof", Message: fmt.Sprintf("%s %q must be one of: %s",
		path, role, strings.Join(slices.Sorted(maps.Keys(roles)), ", "))}
}

// toolState reads attempted actions from lists shaped like them, and sums up
// everything else as entities, so the agent sees what the bot knew without
// the package carrying raw tool state.
func (c *conversion) toolState(state any) {
	const path = "context_snapshot.tool_state"
	var actions []sourced[handoff.AttemptedAction]
	state = scrub(state)
	if obj, ok := state.(map[string]any); ok {
		// Tool configurations (connection strings, endpoints, keys) are how the bot's tools
		// run, nothing a human or a training set needs: they are dropped at the door.
		delete(obj, "configurations")
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			if found, ok := actionList(path+"."+key, obj[key]); ok {
				actions = append(actions, found...)
			} else {
				c.summary("tool_state."+key, path+"."+key, obj[key])
			}
		}
	} else if found, ok := actionList(path, state); ok {
		actions = found
	} else {
		c.summary("tool_state", path, state)
	}
	c.p.AttemptedActions = keepLast(actions, maxActions, "attempted_actions", c.from)
}

// actionList reads v as attempted actions if it is a non-empty list of
// objects with tool and result strings, and an ok boolean and an at time at
// most.
func actionList(path string, v any) ([]sourced[handoff.AttemptedAction], bool) {
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		return nil, false
	}
	actions := make([]sourced[handoff.AttemptedAction], len(items))
	for i, item := range items {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, false
		}
		var a handoff.AttemptedAction
		for key, val := range obj {
			switch key {
			case "tool":
				a.Tool, ok = val.(string)
			case "result":
				var result string
				result, ok = val.(string)
				a.Result = truncateText(result, maxSummary)
			case "ok":
				var b bool
				b, ok = val.(bool)
				a.OK = &b
			case "at":
				var t time.Time
				t, ok = timeOf(val)
				a.At = &t
			default:
				ok = false
			}
			if !ok {
				return nil, false
			}
		}
		if strings.TrimSpace(a.Tool) == "" || strings.TrimSpace(a.Result) == "" {
			return nil, false
		}
		actions[i] = sourced[handoff.AttemptedAction]{a, fmt.Sprintf("%s[%d]", path, i)}
	}
	return actions, true
}

// summary stores v as a string entity, while the package has room; the
// sender's metadata, read first, keeps its entities.
func (c *conversion) summary(key, from string, v any) {
	key = entityKey(key)
	if _, taken := c.p.StructuredEntities[key]; taken || len(c.p.StructuredEntities) >= maxEntities {
		return
	}
	var text string
	switch x := v.(type) {
	case nil:
		return
	case string:
		text = x
	case json.Number:
		text = string(x)
	case bool:
		text = strconv.FormatBool(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			c.errs = append(c.errs, handoff.FieldError{Field: from, Rule: handoff.RuleType, Message: from + " must hold JSON values only: " + err.Error()})
			return
		}
		text = string(b)
	}
	if strings.TrimSpace(text) != "" {
		c.entity(key, handoff.StringEntity(truncateText(text, maxSummary)), from)
	}
}

// entityKey makes a tool state key fit the rule of entity keys, as the
// sender chose those keys for its tools, not for the desk.
func entityKey(key string) string {
	b := []byte(key)
	for i, ch := range b {
		switch {
		case ch >= 'A' && ch <= 'Z', ch >= 'a' && ch <= 'z', ch >= '0' && ch <= '9', strings.IndexByte("_.:-", ch) >= 0:
		default:
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 64)])
}

// keepLast returns the last n items, recording where each came from under
// its index in the package list field.
func keepLast[T any](items []sourced[T], n int, field string, from map[string]string) []T {
	items = items[max(len(items)-n, 0):]
	out := make([]T, len(items))
	for i, item := range items {
		out[i] = item.v
		from[fmt.Sprintf("%s[%d]", field, i)] = item.from
	}
	return out
}

// translate renames a package field error after the request field the value
// came from: the longest recorded package path containing the field wins.
func (c *conversion) translate(fe handoff.FieldError) handoff.FieldError {
	best := ""
	for pkgPath := range c.from {
		if len(pkgPath) > len(best) && fe.Within(pkgPath) {
			best = pkgPath
		}
	}
	if best == "" {
		return fe
	}
	to := c.from[best] + fe.Field[len(best):]
	if rest, ok := strings.CutPrefix(fe.Message, fe.Field); ok {
		fe.Message = to + rest
	}
	fe.Field = to
	return fe
}

// firstParagraph keeps the first paragraph of s, cut to n characters.
func firstParagraph(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) == "" {
			lines = lines[:i]
			break
		}
	}
	return truncateText(strings.Join(lines, "\n"), n)
}

// truncateText cuts s to n characters, the last an ellipsis to show the cut.
func truncateText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// secretWords mark a member whose value is a credential, whatever the tool calls it, wherever in
// its name they stand; secretNames do so only as a word of the name ("db_pwd", "userPass",
// "auth"), where as a part of a word they would drop innocent members ("compass", "author").
var (
	secretWords = []string{"password", "passwd", "passphrase", "secret", "token", "api_key", "apikey", "credential", "connection_string",
		"connectionstring", "dsn", "private_key", "privatekey", "access_key", "accesskey", "authorization", "cookie", "bearer"}
	secretNames = []string{"pass", "pwd", "auth", "creds"}
)

// secret reports whether a member named key holds a credential.
func secret(key string) bool {
	k := strings.ToLower(strings.ReplaceAll(key, "-", "_"))
	if slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(k, w) }) {
		return true
	}
	return slices.ContainsFunc(nameWords(key), func(w string) bool { return slices.Contains(secretNames, w) })
}

// nameWords splits a member's name into its lower-case words: at every character that is neither
// a letter nor a digit, and before a capital that follows a lower-case letter ("userPwd").
func nameWords(name string) []string {
	var words []string
	var word []rune
	prev := rune(0)
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			words, word = appendWord(words, word), nil
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			words, word = appendWord(words, word), []rune{unicode.ToLower(r)}
		default:
			word = append(word, unicode.ToLower(r))
		}
		prev = r
	}
	return appendWord(words, word)
}

func appendWord(words []string, word []rune) []string {
	if len(word) == 0 {
		return words
	}
	return append(words, string(word))
}

var (
	// urlPassword is the password of a URL with credentials, as in "postgres://app:pw@db/x".
	urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/:@\s]*:)[^@\s]*@`)
	// keyValueSecret is the value of a key=value or key: value pair whose key names a credential,
	// as a connection string ("Server=db;User Id=sa;Password=pw;"), an environment line
	// ("AWS_SECRET_ACCESS_KEY=…") or a header ("Authorization: Bearer …") writes it.
	keyValueSecret = regexp.MustCompile(`(?i)\b((?:[\w.-]*(?:password|passwd|pwd|secret|token|api_?key|access_?key|private_?key|credential)[\w.-]*|` +
		`pass|auth|authorization|proxy-authorization)["']?\s*[=:]\s*["']?)(?:(?:bearer|basic|token)\s+)?[^\s;&,"']+`)
	// bearerToken is a bearer token wherever it stands: the word, then a run of token characters
	// that holds a digit or punctuation, which prose after the word does not.
	bearerToken = regexp.MustCompile(`(?i)\b(bearer\s+)([A-Za-z0-9._~+/-]{8,}=*)`)
)

// scrubText removes from s the passwords of URLs, the values of pairs whose key names a
// credential, and bearer tokens.
func scrubText(s string) string {
	s = urlPassword.ReplaceAllString(s, "${1}[removed]@")
	s = keyValueSecret.ReplaceAllString(s, "${1}[removed]")
	return bearerToken.ReplaceAllStringFunc(s, func(m string) string {
		sub := bearerToken.FindStringSubmatch(m)
		if !strings.ContainsAny(sub[2], "0123456789._~+/-=") {
			return m
		}
		return sub[1] + "[removed]"
	})
}

// scrub returns v, decoded JSON, without the members secret names and with the passwords of
// URLs removed from its strings: tool state is kept only as what a human may read.
func scrub(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if !secret(k) {
				out[k] = scrub(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = scrub(val)
		}
		return out
	case string:
		return scrubText(x)
	}
	return v
}
