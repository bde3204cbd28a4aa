package server

import (
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/handoff"
)

// handBackForm reads the hand-back of the return and resolve forms: done and instruction, the
// entities confirmed (confirm, one per key) and the corrected values (correct.<key>; an empty
// one corrects nothing). Every part is optional.
func handBackForm(c echo.Context) (handoff.HandBack, error) {
	form, err := c.FormParams()
	if err != nil {
		return handoff.HandBack{}, err
	}
	back := handoff.HandBack{Done: strings.TrimSpace(form.Get("done")), Instruction: strings.TrimSpace(form.Get("instruction"))}
	back.Confirmed = slices.DeleteFunc(slices.Clone(form["confirm"]), func(key string) bool { return key == "" })
	for name, values := range form {
		key, ok := strings.CutPrefix(name, "correct.")
		if v := strings.TrimSpace(strings.Join(values, "")); ok && v != "" {
			if back.Corrected == nil {
				back.Corrected = map[string]string{}
			}
			back.Corrected[key] = v
		}
	}
	return back, nil
}
