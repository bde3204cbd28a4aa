// Package views holds the desk's templ components. Components take plain view models shaped like
// the page, never the web framework's context or database rows, so the same component renders a
// whole page, a websocket fragment and a test.
package views

import "time"

// Viewer is who the page is rendered for: it decides the navigation and what is masked.
type Viewer struct {
	Name         string
	Email        string
	Role         string
	IsSupervisor bool
	IsAdmin      bool
}

// LoginView is the login form, possibly redisplayed after a failure.
type LoginView struct {
	Email string
	Error string
	Next  string
}

// QueueSummary is one row of "my queues".
type QueueSummary struct {
	Name       string
	Open       int
	Waiting    int
	OldestWait time.Duration // zero when nothing waits
	OverSLA    bool
	Member     bool
}

// HomeView is the "my queues" page.
type HomeView struct {
	Viewer Viewer
	Queues []QueueSummary
}

// ErrorView is a full-page error for browsers.
type ErrorView struct {
	Viewer  *Viewer
	Status  int
	Title   string
	Message string
}
