package sw4rm

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/handoffdesk/desk/internal/handoff"
)

// decoder reads a request. Each member first sets its field back to its
// default, as a member given again replaces the earlier one, and a null
// leaves it there.
type decoder struct {
	r           *handoff.Reader
	body        []byte
	snapshotErr error // from context_snapshot: ends decoding with a 400
	req         Request
	ctx         Context
}

func (d *decoder) requestMember(name string) {
	r := &d.req
	switch name {
	case "request_id":
		d.text(&r.RequestID)
	case "from_agent":
		d.text(&r.FromAgent)
	case "to_agent":
		d.text(&r.ToAgent)
	case "reason":
		d.text(&r.Reason)
	case "context_snapshot":
		d.snapshot()
	case "preserve_history":
		r.PreserveHistory = true
		if d.given() {
			if b, ok := d.r.Bool("a boolean"); ok {
				r.PreserveHistory = b
			}
		}
	case "capabilities_required":
		d.texts(&r.CapabilitiesRequired)
	case "priority":
		d.integer(&r.Priority)
	case "timeout":
		d.duration(&r.Timeout)
	case "metadata":
		d.metadata(&r.Metadata)
	default:
		d.r.Unknown("a SW4RM HandoffRequest")
	}
}

func (d *decoder) contextMember(name string) {
	switch name {
	case "conversation_history":
		d.ctx.ConversationHistory = nil
		if d.given() {
			d.history()
		}
	case "tool_state":
		d.ctx.ToolState = nil
		if !d.given() {
			return
		}
		switch d.r.Kind() {
		case '{', '[':
			d.ctx.ToolState = d.r.Value()
		default:
			d.r.WrongType("an object or an array")
		}
	default:
		// The context's metadata describes the swarm, not the customer, and a newer SDK's
		// members are the swarm's too: the desk keeps neither and refuses neither (Object
		// skips what is left unread).
	}
}

// given reads a null, which counts as absent, and reports whether a value
// is there instead.
func (d *decoder) given() bool {
	if d.r.Kind() == 'n' {
		d.r.Skip()
		return false
	}
	return true
}

func (d *decoder) text(dst *string) {
	*dst = ""
	if d.given() {
		*dst, _ = d.r.String("a string")
	}
}

func (d *decoder) texts(dst *[]string) {
	*dst = nil
	if !d.given() {
		return
	}
	d.r.Array("an array of strings", func(int) {
		if s, ok := d.r.String("a string"); ok {
			*dst = append(*dst, s)
		}
	})
}

func (d *decoder) integer(dst *int32) {
	*dst = 0
	if !d.given() {
		return
	}
	n, ok := d.r.Number("an integer")
	if !ok {
		return
	}
	i, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		d.r.Problem(handoff.RuleType, "must be a 32-bit integer")
		return
	}
	*dst = int32(i)
}

// duration reads seconds as SW4RM's Python SDK writes them, or a duration
// string as protobuf's JSON mapping writes a Duration ("30s", "1.5s").
func (d *decoder) duration(dst *time.Duration) {
	*dst = 0
	if !d.given() {
		return
	}
	switch d.r.Kind() {
	case '0':
		n, _ := d.r.Number("")
		secs, err := n.Float64()
		if err == nil && math.Abs(secs) < math.MaxInt64/float64(time.Second) {
			*dst = time.Duration(secs * float64(time.Second))
			return
		}
	case '"':
		s, _ := d.r.String("")
		if t, err := time.ParseDuration(s); err == nil {
			*dst = t
			return
		}
	default:
		d.r.WrongType(`a number of seconds or a duration string like "30s"`)
		return
	}
	d.r.Problem("duration", `must be a number of seconds or a duration string like "30s"`)
}

// metadata takes numbers, booleans, objects and lists as their JSON text,
// since SW4RM's Python SDK allows any value where the desk wants strings.
func (d *decoder) metadata(dst *map[string]string) {
	*dst = nil
	if !d.given() {
		return
	}
	md := map[string]string{}
	isObject := d.r.Object("an object", func(key string) {
		delete(md, key) // in case an earlier member of that name set it
		switch d.r.Kind() {
		case '"':
			md[key], _ = d.r.String("")
		case '0':
			n, _ := d.r.Number("")
			md[key] = string(n)
		case 't', 'f':
			b, _ := d.r.Bool("")
			md[key] = strconv.FormatBool(b)
		case 'n': // absent, as a Python None
		default:
			if b, err := json.Marshal(d.r.Value()); err == nil {
				md[key] = string(b)
			}
		}
	})
	if isObject {
		*dst = md
	}
}

func (d *decoder) snapshot() {
	d.ctx, d.snapshotErr = Context{}, nil
	if !d.given() {
		return
	}
	switch d.r.Kind() {
	case '{':
		d.r.Object("", d.contextMember)
	case '"':
		s, _ := d.r.String("")
		if s == "" { // protobuf's JSON for empty bytes
			return
		}
		raw, err := base64Decode(s)
		if err != nil {
			d.snapshotErr = d.base64Error(err)
			return
		}
		d.snapshotErr = d.r.ReadEmbedded(raw, "after base64 decoding", func() {
			d.r.Object("the base64 of a JSON object (a serialized HandoffContext)", d.contextMember)
		})
		if d.snapshotErr != nil {
			d.ctx = Context{}
		}
	default:
		d.r.WrongType("a base64 string or a JSON object")
	}
}

// base64Decode accepts what protobuf's JSON mapping accepts for bytes: the
// standard or URL-safe alphabet, with or without padding.
func base64Decode(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// base64Error points at the bad character in the body, so the sender can
// find it as they would a JSON error.
func (d *decoder) base64Error(err error) *handoff.SyntaxError {
	at := d.r.StringOffset()
	var corrupt base64.CorruptInputError
	if errors.As(err, &corrupt) {
		at += 1 + int64(corrupt) // past the opening quote
	}
	return handoff.NewEncodingError(d.body, at+1, "context_snapshot is not valid base64", err.Error())
}

// history reads messages as LLM APIs write them. Members other than role,
// content, at and timestamp are skipped rather than refused: such messages
// carry tool calls, names and ids that a tier-2 agent does not read.
func (d *decoder) history() {
	d.r.Array("an array of messages", func(int) {
		var m Message
		// "at" is the package's name, so it wins over "timestamp".
		var at, timestamp *time.Time
		var atGiven bool
		isObject := d.r.Object("a message object", func(name string) {
			switch name {
			case "role":
				d.text(&m.Role)
			case "content":
				m.Content = d.content()
			case "at":
				at, atGiven = d.timestamp()
			case "timestamp":
				timestamp, _ = d.timestamp()
			}
		})
		if !isObject {
			return
		}
		m.At = timestamp
		if atGiven {
			m.At = at
		}
		d.ctx.ConversationHistory = append(d.ctx.ConversationHistory, m)
	})
}

// content reads a string, or the text parts of a list of content parts, the
// form of multimodal messages; other parts (images, tool calls) are skipped.
func (d *decoder) content() string {
	switch d.r.Kind() {
	case 'n':
		d.r.Skip()
		return ""
	case '"':
		s, _ := d.r.String("")
		return s
	case '[':
		var texts []string
		d.r.Array("", func(int) {
			if d.r.Kind() != '{' {
				return
			}
			var text string
			var isText bool
			d.r.Object("", func(name string) {
				if name != "text" {
					return
				}
				text, isText = "", false
				if d.r.Kind() == '"' {
					text, isText = d.r.String("")
				}
			})
			if isText {
				texts = append(texts, text)
			}
		})
		return strings.Join(texts, "\n")
	}
	d.r.WrongType("a string or a list of content parts")
	return ""
}

// timestamp reads a time, and reports whether one was given rather than null.
func (d *decoder) timestamp() (*time.Time, bool) {
	if !d.given() {
		return nil, false
	}
	t, ok := timeOf(d.r.Value())
	if !ok {
		d.r.Problem(handoff.RuleDatetime, "must be an RFC 3339 timestamp, like 2026-06-02T14:03:11Z, or Unix seconds")
		return nil, true
	}
	return &t, true
}

// timeOf reads an RFC 3339 string or Unix seconds, Python's time.time().
func timeOf(v any) (time.Time, bool) {
	switch x := v.(type) {
	case string:
		t, err := time.Parse(time.RFC3339, x)
		return t.UTC(), err == nil
	case json.Number:
		f, err := x.Float64()
		// Past 2286 it is milliseconds, JavaScript's Date.now(), sent by mistake.
		if err != nil || f < 0 || f >= 1e10 {
			return time.Time{}, false
		}
		secs, frac := math.Modf(f)
		return time.Unix(int64(secs), int64(frac*1e9)).UTC(), true
	}
	return time.Time{}, false
}
