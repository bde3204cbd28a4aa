package server

// CatchUpWindow is catchUpWindow, for tests that go past it.
const CatchUpWindow = catchUpWindow
