package views

import "strconv"

// SearchView is /packages: the search box and filters as given, and the packages found.
type SearchView struct {
	Viewer  Viewer
	Filter  SearchFilter
	Options SearchOptions
	Results []SearchResult
	// Error is a filter the desk could not read, shown beside its field (Param) with the form kept.
	Error SearchError
	// More is the link to the next page; "" on the last.
	More string
	// CSV is the export of everything the filters select; "" for agents.
	CSV string
	// Substrings says whether the search box matches any part of an id, name, email or phone, or
	// only whole words and their beginnings (the database lacks pg_trgm).
	Substrings bool
	// Count is how many packages the filters select, all pages together; nil when the search box
	// is used or the count was not made.
	Count *SearchCount
}

// SearchCount is how many packages the filters select, and how many of the records the record
// filter selects they hold (Noun names them; "" without a record filter). Uncounted says why there
// is no count.
type SearchCount struct {
	Packages, Records int
	Noun              string
	Uncounted         string
}

// SearchFilter is the form's values, as given.
type SearchFilter struct {
	Q, Queue, Status, Trigger, SourceAgent, Outcome, Repeat, SLABreached, Since, Until string
	Agent, Accepted, Rejected, Open, Record, RecordBy, Tag, RecordSince, RecordUntil   string
	CSAT                                                                               string
}

// SearchOptions are the choices of the form's selects.
type SearchOptions struct {
	Statuses, Triggers, Outcomes, Records, Tags []string
}

// SearchError names the parameter at fault and what was wrong with it.
type SearchError struct {
	Param, Message string
}

// SearchResult is one package found, masked for the viewer.
type SearchResult struct {
	ID, Created, Queue, Status, Trigger, SourceAgent, Outcome, Assignee, Contact, Problem string
	Repeat, SLABreached                                                                   bool
}

// ReassignControls offer a supervisor to move a held package to another agent of its queue, or to
// take it over.
type ReassignControls struct {
	Members []ReassignMember
	// Self is the supervisor's own email, which the take-over posts.
	Self string
}

// ReassignMember is an agent of the package's queue the package may go to.
type ReassignMember struct {
	Email, Name string
	// Room says how many more packages they can take; 0 is full.
	Room int
}

// firstWithRoom is the member a reassign select starts on: the first with room, marked selected so
// that the page's live updates (desk.js' editing) see an untouched select as untouched; -1 when
// nobody has room.
func firstWithRoom(members []ReassignMember) int {
	for i, m := range members {
		if m.Room > 0 {
			return i
		}
	}
	return -1
}

func roomText(room int) string {
	switch room {
	case 0:
		return "full"
	case 1:
		return "room for 1"
	}
	return "room for " + strconv.Itoa(room)
}

// plural is one or many, as n says.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
