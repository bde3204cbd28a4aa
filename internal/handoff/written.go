package handoff

// Writer is who wrote a text about a package (a note, a reason, a decision, a reply), as masking it
// for a viewer needs to know.
type Writer struct {
	// Viewer: the viewer wrote it. A text is shown to its writer as they wrote it.
	Viewer bool
	// SawContact: the writer could see the package's contact unmasked when they wrote it (their
	// role then reached the queue's PII role then), or is a bot, which hands the contact over.
	// It is recorded with the text, never read from the writer's role now.
	SawContact bool
}

// WrittenMaskFor masks, for v, texts people wrote about p. One rule: a text by someone who could
// see the contact's values is masked for a viewer who cannot, as p's own free text is
// (NoteMaskFor); every other text reads as written, for every viewer: to its writer, to a viewer
// who sees p unmasked, and to anyone when its writer could not see the values.
//
// Why: a text by someone who could not see the values reveals nothing they knew. Masked for
// anyone, a guess they typed ("is it Philomena?") would read masked when right and as typed when
// wrong, and confirm it to every reader below the PII role, on the page and in search. Shown as
// written, a right guess and a wrong one read alike to everyone. A name an agent who sees the
// values wrote down stays hidden from those who cannot see them.
func (p Package) WrittenMaskFor(v Visibility) func(text string, by Writer) string {
	if v.PII {
		return func(text string, _ Writer) string { return text }
	}
	values := p.NoteMaskFor(v)
	return func(text string, by Writer) string {
		if by.SawContact && !by.Viewer {
			return values(text)
		}
		return text
	}
}
