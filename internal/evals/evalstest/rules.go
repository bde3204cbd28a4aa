// Package evalstest holds the rules that the trainers reading the desk's eval exports apply to a
// line, written down in Go so that tests can hold every exported line to them: the tools
// themselves run in Python, which this machine cannot install.
//
// The sources, each rule citing the one it comes from:
//   - [openai-checker]: OpenAI's fine-tuning data checker, the cookbook notebook "Data
//     preparation and analysis for chat model fine-tuning": every message has a role among
//     system, user, assistant and function; a non-empty string content; no key but role,
//     content, name, function_call and weight; at least one assistant message per example.
//   - [openai-dpo]: OpenAI's preference fine-tuning guide: a line holds input.messages,
//     preferred_output and non_preferred_output, each output one assistant message, and the
//     input ends on the user's turn that the outputs answer.
//   - [trl-data-utils]: TRL's trl/data_utils.py. apply_chat_template takes a conversational
//     prompt whose last message is the user's (a generation prompt is added) or the
//     assistant's (the completion continues it; anything else raises "Invalid role in the last
//     message"); is_conversational wants lists of {role, content}; KTO lines carry a bool label.
//   - [alternation]: the chat templates of Llama 2, Mistral and Gemma raise "Conversation roles
//     must alternate user/assistant/user/assistant/..." on anything but an optional system
//     message followed by strictly alternating turns that start with the user's.
package evalstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

type message map[string]any

// Check reports what in line breaks the rules of the trainer that reads format.
func Check(format string, line []byte) error {
	switch format {
	case "openai-sft":
		var l struct {
			Messages []message `json:"messages"`
		}
		if err := strict(line, &l, "messages"); err != nil {
			return err
		}
		return conversation(l.Messages, "assistant")
	case "openai-dpo":
		var l struct {
			Input struct {
				Messages []message `json:"messages"`
			} `json:"input"`
			Preferred    []message `json:"preferred_output"`
			NonPreferred []message `json:"non_preferred_output"`
		}
		if err := strict(line, &l, "input", "preferred_output", "non_preferred_output"); err != nil {
			return err
		}
		return errors.Join(prompt("input.messages", l.Input.Messages), completion("preferred_output", l.Preferred),
			completion("non_preferred_output", l.NonPreferred))
	case "trl-preference":
		var l struct {
			Prompt   []message `json:"prompt"`
			Chosen   []message `json:"chosen"`
			Rejected []message `json:"rejected"`
		}
		if err := strict(line, &l, "prompt", "chosen", "rejected"); err != nil {
			return err
		}
		return errors.Join(prompt("prompt", l.Prompt), completion("chosen", l.Chosen), completion("rejected", l.Rejected))
	case "kto":
		var l struct {
			Prompt     []message `json:"prompt"`
			Completion []message `json:"completion"`
			Label      *bool     `json:"label"`
		}
		if err := strict(line, &l, "prompt", "completion", "label"); err != nil {
			return err
		}
		if l.Label == nil {
			return errors.New("kto: label is not a bool [trl-data-utils]")
		}
		return errors.Join(prompt("prompt", l.Prompt), completion("completion", l.Completion))
	}
	return fmt.Errorf("no rules for format %q", format)
}

// strict decodes line into v and refuses keys outside want: a trainer ignores them at best.
func strict(line []byte, v any, want ...string) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(line, &keys); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	for k := range keys {
		if !slices.Contains(want, k) {
			return fmt.Errorf("unknown key %q [openai-checker]", k)
		}
	}
	for _, k := range want {
		if _, ok := keys[k]; !ok {
			return fmt.Errorf("missing key %q", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	return dec.Decode(v)
}

// conversation checks messages as one chat: valid messages, an optional system message, then
// strictly alternating turns from the user's, the last of the role last.
func conversation(msgs []message, last string) error {
	if len(msgs) == 0 {
		return errors.New("no messages")
	}
	for i, m := range msgs {
		if err := valid(m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	turns := msgs
	if msgs[0]["role"] == "system" {
		turns = msgs[1:]
	}
	want := "user"
	for i, m := range turns {
		if m["role"] != want {
			return fmt.Errorf("turn %d is %v, want %s: roles must alternate user/assistant from the user's [alternation]", i, m["role"], want)
		}
		want = map[string]string{"user": "assistant", "assistant": "user"}[want]
	}
	if len(turns) == 0 || turns[len(turns)-1]["role"] != last {
		return fmt.Errorf("the last message is not the %s's [trl-data-utils]", last)
	}
	if last == "assistant" && !slices.ContainsFunc(msgs, func(m message) bool { return m["role"] == "assistant" }) {
		return errors.New("no assistant message [openai-checker]")
	}
	return nil
}

// prompt checks a prompt: a conversation that ends on the user's turn, which the completion
// answers [trl-data-utils] [openai-dpo].
func prompt(name string, msgs []message) error {
	if err := conversation(msgs, "user"); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// completion checks an answer: one assistant message [openai-dpo].
func completion(name string, msgs []message) error {
	if len(msgs) != 1 || msgs[0]["role"] != "assistant" {
		return fmt.Errorf("%s: want one assistant message, have %d [openai-dpo]", name, len(msgs))
	}
	if err := valid(msgs[0]); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func valid(m message) error {
	for k := range m {
		if !slices.Contains([]string{"role", "content", "name", "function_call", "weight"}, k) {
			return fmt.Errorf("unrecognized key %q [openai-checker]", k)
		}
	}
	if !slices.Contains([]any{"system", "user", "assistant", "function"}, m["role"]) {
		return fmt.Errorf("unrecognized role %v [openai-checker]", m["role"])
	}
	if content, ok := m["content"].(string); !ok || content == "" {
		return fmt.Errorf("missing content or not a string [openai-checker]")
	}
	return nil
}
